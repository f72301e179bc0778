// fault_stray_client: opens malformed and unauthenticated connections to the
// listening sockets of a running hetccl job, over loopback only.
//
//   fault_stray_client --pids P1,P2,.. [--id HEX] [--mode flood|silent] [--threads N]
//                      [--hold-ms MS] [--per-port K] [--targets all|root|ranks]
//
// (a socket that several of the pids hold counts as the first one's: list
// the owner of the rendezvous root before the ranks forked from it)
// It finds the job's listeners itself: every ~2 ms it maps the socket inodes
// of the given processes (/proc/<pid>/fd) to LISTEN entries of
// /proc/net/tcp, and attacks those bound to 127.0.0.1 or 0.0.0.0 through
// 127.0.0.1. It runs until its stdin closes, printing "progress <attempted>
// <established> <ports>" lines while it works and one "summary k=v ..." line
// at the end, after one "port <port> <owner pid> <service> <connections>
// <first seen>" line per listener found (service from the server's hello: 1
// root, 2 ring, 3 transport, 0 not seen; first seen in CLOCK_MONOTONIC
// seconds). With --id (the job's unique id, hex) it knows the root's port
// and the job secret, and adds authenticated-but-malformed requests.
//
// --mode flood: connections that each do one thing wrong, picked at random: connect
//   and close; garbage (at least one handshake's worth, up to 4 KiB); a
//   handshake cut short; wrong magic; wrong protocol version; a hello with a
//   forged MAC; huge length fields; with --id also authenticated requests
//   with out-of-range lengths, ranks or service. Connections whose request
//   the server must refuse stay open on our side until the server closes
//   them; those still open 3 s after the attack ends count as "kept_open"
//   (a listener that is not accepting yet queues connections: they are
//   handled, or reset, once it accepts or closes).
// --mode silent: on each listener as it appears, K connections that send
//   nothing and stay open for --hold-ms (a stray or stalled client).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"
#include "core/error.h"
#include "proc_sockets.h"

namespace {

// The handshake messages as they travel (mirrors src/bootstrap/auth.cc): the
// server speaks first.
struct WireServerHello {
  uint32_t magic, version, service, reserved;
  uint8_t nonce[16];
};
struct WireClientProof {
  uint32_t magic, version;
  hetccl::PeerHello hello;
  uint8_t nonce[16];
  uint64_t mac;
};
static_assert(sizeof(WireServerHello) == 32 && sizeof(WireClientProof) == 56, "handshake wire format");

struct Port {
  int port = 0;
  int pid = 0;
  int service = 0;  // from the ServerHello once seen: 1 root, 2 ring, 3 transport
  bool active = false;
  long hits = 0;  // established connections
  double firstSeen = 0;
  int silentPlaced = 0;
  double fullUntil = 0;  // its accept queue looked full: skip it until then
};

std::mutex gMu;
std::map<int, Port> gPorts;  // by port
std::atomic<bool> gStop{false};
std::atomic<long> gAttempted{0}, gEstablished{0}, gRefused{0}, gTimedOut{0}, gDropped{0}, gKept{0}, gSilent{0};
std::atomic<long> gAuthOk{0};
std::atomic<long> gActionCount[9];
int gRootPort = -1;
bool gHaveId = false;
hetccl::IdContents gId;
std::string gMode = "flood", gTargets = "all";
int gHoldMs = 3000, gPerPort = 4;

const char* kActionNames[9] = {"close",   "garbage",  "partial",          "bad_magic", "bad_version",
                               "bad_mac", "huge_len", "auth_bad_request", "silent"};

double nowS() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void scanner(std::vector<int> pids) {
  while (!gStop) {
    auto listening = loopbackListeners();
    std::map<int, int> found;  // port -> pid
    for (int pid : pids)
      for (unsigned long ino : socketInodes(pid)) {
        auto it = listening.find(ino);
        // First pid wins: forked ranks hold their parent's sockets for a
        // moment (until they close them), so list the owner first.
        if (it != listening.end()) found.emplace(it->second, pid);
      }
    {
      std::lock_guard<std::mutex> g(gMu);
      for (auto& [port, p] : gPorts) p.active = found.count(port) > 0;
      for (auto [port, pid] : found) {
        Port& p = gPorts[port];
        if (p.port == 0) {
          p.port = port;
          p.pid = pid;
          p.firstSeen = nowS();
          if (port == gRootPort) p.service = 1;
        }
        p.active = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool wanted(const Port& p) {
  if (gTargets == "root") return p.port == gRootPort;
  if (gTargets == "ranks") return p.port != gRootPort;
  return true;
}

// Non-blocking connect to 127.0.0.1:port, waiting up to 200 ms (a listener
// whose accept queue is full drops the SYN). Returns the non-blocking fd, or
// -1 (refused) / -2 (timed out).
int connectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
  if (errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  if (poll(&p, 1, 200) <= 0) {
    close(fd);
    return -2;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads exactly n bytes within waitMs (the server speaks first in the
// handshake, but only once it accepted: a listener that is not accepting
// yet leaves the bytes unsent).
bool readExact(int fd, void* buf, size_t n, int waitMs) {
  auto* p = static_cast<uint8_t*>(buf);
  double until = nowS() + waitMs / 1000.0;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r == 0) return false;
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (errno != EAGAIN && errno != EINTR) return false;
    int left = static_cast<int>((until - nowS()) * 1000);
    if (left <= 0) return false;
    pollfd pf{fd, POLLIN, 0};
    poll(&pf, 1, left);
  }
  return true;
}

void sendBytes(int fd, const void* buf, size_t n) { (void)!send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT); }

void noteService(int port, const WireServerHello& sh) {
  std::lock_guard<std::mutex> g(gMu);
  if (sh.magic == hetccl::kProtocolMagic) gPorts[port].service = static_cast<int>(sh.service);
}

// Connections whose request the server must refuse: the watcher counts each
// one the server closes; those still open when the attack ends were kept.
struct Pending {
  int fd;
  int port;
  std::string head;  // the first bytes from the server: its hello tells the service
};
std::mutex gPendMu;
std::vector<Pending> gPending;

void expectDropped(int fd, int port, const WireServerHello* seen) {
  std::lock_guard<std::mutex> g(gPendMu);
  gPending.push_back(Pending{fd, port, seen && seen->magic ? std::string(sizeof(*seen), 'x') : std::string()});
}

// Polls the pending connections: data (a server hello, a refusal) is read
// and ignored; end of stream or an error means the server dropped it.
void watcher(double graceS) {
  std::vector<Pending> conns;
  double stopAt = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> g(gPendMu);
      conns.insert(conns.end(), gPending.begin(), gPending.end());
      gPending.clear();
    }
    if (gStop && stopAt == 0) stopAt = nowS() + graceS;
    if (stopAt != 0 && (conns.empty() || nowS() >= stopAt)) break;
    if (conns.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    std::vector<pollfd> pf;
    for (const Pending& c : conns) pf.push_back(pollfd{c.fd, POLLIN, 0});
    poll(pf.data(), pf.size(), 10);
    std::vector<Pending> still;
    for (size_t i = 0; i < conns.size(); ++i) {
      Pending& c = conns[i];
      bool gone = false;
      if (pf[i].revents) {
        char buf[4096];
        for (;;) {
          ssize_t r = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (r > 0) {
            if (c.head.size() < sizeof(WireServerHello)) {
              size_t take = std::min(sizeof(WireServerHello) - c.head.size(), static_cast<size_t>(r));
              c.head.append(buf, take);
              if (c.head.size() == sizeof(WireServerHello)) {
                WireServerHello sh;
                memcpy(&sh, c.head.data(), sizeof(sh));
                noteService(c.port, sh);
              }
            }
            continue;
          }
          if (r == 0 || (errno != EAGAIN && errno != EINTR)) gone = true;
          break;
        }
      }
      if (gone) {
        ++gDropped;
        close(c.fd);
      } else {
        still.push_back(std::move(c));
      }
    }
    conns.swap(still);
  }
  gKept += static_cast<long>(conns.size());
  for (const Pending& c : conns) close(c.fd);
}

WireClientProof forged(std::mt19937_64& rng) {
  WireClientProof cp{};
  cp.magic = hetccl::kProtocolMagic;
  cp.version = hetccl::kProtocolVersion;
  cp.hello.jobId = gHaveId ? gId.jobId : rng();
  cp.hello.rank = static_cast<int32_t>(rng() % 4);
  cp.hello.nranks = 4;
  cp.hello.service = static_cast<uint32_t>(1 + rng() % 3);
  for (auto& b : cp.nonce) b = static_cast<uint8_t>(rng());
  cp.mac = rng();
  return cp;
}

// Authenticated (the job secret is known) but the request is out of range:
// the server must check what it reads and drop the connection, not trust it.
// The rendezvous root gets a record size out of range, a negative number of
// ranks or a rank out of range; a rank's listener gets a hello from a rank
// that does not exist. Only on listeners that answer at once (the handshake
// needs the server's nonce). Returns false when the fd was closed here.
bool authBadRequest(int fd, int port, int variant) {
  using namespace hetccl;
  WireServerHello sh{};
  // The root vets each connection on a thread of its own: its hello comes
  // at once (allow for a loaded machine). A rank's listener may not be
  // accepting yet: then give up quickly.
  pollfd pf{fd, POLLIN, 0};
  if (poll(&pf, 1, port == gRootPort ? 1000 : 20) <= 0) return false;
  PeerHello me{};
  me.jobId = gId.jobId;
  me.nranks = 4;
  if (port == gRootPort) {
    me.service = static_cast<uint32_t>(Service::kRoot);
    me.rank = variant == 2 ? 77 : 0;
    if (variant == 1) me.nranks = -5;
  } else {
    me.service = static_cast<uint32_t>(variant % 2 ? Service::kTransport : Service::kRing);
    me.rank = 1000;
  }
  (void)sh;
  Socket s(dup(fd));
  try {
    clientHandshake(s, gId.secret, me, Deadline::in(1), "stray client");
  } catch (const Error& e) {
    // Refused, or the listener serves the other kind of connection: the
    // client gives up, as a real one would.
    return false;
  }
  ++gAuthOk;
  if (port == gRootPort) {
    uint32_t len = variant == 0 ? 0xFFFFFFFFu : 64;
    sendBytes(fd, &len, sizeof(len));
    if (len == 64) {
      std::vector<uint8_t> rec(64, 0xAB);
      sendBytes(fd, rec.data(), rec.size());
    }
  }
  return true;
}

void floodOne(std::mt19937_64& rng, int port) {
  int fd = connectLoopback(port);
  ++gAttempted;
  if (fd < 0) {
    std::lock_guard<std::mutex> g(gMu);
    if (fd == -1)
      ++gRefused, gPorts[port].active = false;  // closed: wait for the next scan
    else
      ++gTimedOut, gPorts[port].fullUntil = nowS() + 0.05;
    return;
  }
  ++gEstablished;
  {
    std::lock_guard<std::mutex> g(gMu);
    ++gPorts[port].hits;
  }
  // Random, not round-robin: a fixed cycle can alias with the choice of port
  // and starve one listener of some kinds.
  int action = static_cast<int>(rng() % (gHaveId ? 8 : 7));
  ++gActionCount[action];
  WireServerHello sh{};
  bool watch = true;
  switch (action) {
    case 0:  // nothing at all
      watch = false;
      break;
    case 1: {  // garbage: at least a client proof's worth, so the server has all it reads
      std::vector<uint8_t> junk(sizeof(WireClientProof) + rng() % 4000);
      for (auto& b : junk) b = static_cast<uint8_t>(rng());
      sendBytes(fd, junk.data(), junk.size());
      break;
    }
    case 2: {  // a handshake cut short, then gone
      WireClientProof cp = forged(rng);
      sendBytes(fd, &cp, 1 + rng() % (sizeof(cp) - 1));
      watch = false;
      break;
    }
    case 3:
    case 4:
    case 5: {  // wrong magic / wrong version / forged MAC
      if (readExact(fd, &sh, sizeof(sh), 5)) noteService(port, sh);
      WireClientProof cp = forged(rng);
      if (action == 3) cp.magic = 0xdeadbeef;
      if (action == 4) cp.version = 99;
      if (action == 5 && sh.magic) memcpy(cp.nonce, sh.nonce, 16);  // a replayed server nonce does not help
      sendBytes(fd, &cp, sizeof(cp));
      break;
    }
    case 6: {  // huge length fields where a header or a record size could be
      uint8_t blob[96];
      memset(blob, 0xFF, sizeof(blob));
      uint64_t huge = ~uint64_t{0} >> 1;
      memcpy(blob + 8, &huge, 8);
      memcpy(blob + 16, &huge, 8);
      uint32_t len = 0xFFFFFFFFu;
      memcpy(blob + 56, &len, 4);
      sendBytes(fd, blob, sizeof(blob));
      break;
    }
    case 7: watch = authBadRequest(fd, port, static_cast<int>(rng() % 3)); break;
  }
  if (watch)
    expectDropped(fd, port, sh.magic ? &sh : nullptr);
  else
    close(fd);
}

void floodWorker(int seed) {
  std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(seed));
  while (!gStop) {
    int port = -1;
    {
      std::lock_guard<std::mutex> g(gMu);
      long best = -1;
      double t = nowS();
      for (auto& [pt, p] : gPorts) {
        if (!p.active || !wanted(p) || p.fullUntil > t) continue;
        if (best < 0 || p.hits < best) {
          best = p.hits;
          port = pt;
        }
      }
    }
    if (port < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    floodOne(rng, port);
  }
}

// --mode silent: K connections per listener, as soon as it is seen, that
// say nothing and stay open for gHoldMs.
void silentWorker() {
  std::vector<std::pair<int, double>> held;  // fd, close at
  while (!gStop || !held.empty()) {
    std::vector<int> fresh;
    if (!gStop) {
      std::lock_guard<std::mutex> g(gMu);
      for (auto& [pt, p] : gPorts)
        if (p.active && wanted(p) && p.silentPlaced < gPerPort) {
          fresh.push_back(pt);
          ++p.silentPlaced;
        }
    }
    for (int port : fresh) {
      int fd = connectLoopback(port);
      ++gAttempted;
      if (fd < 0) {
        ++(fd == -1 ? gRefused : gTimedOut);
        continue;
      }
      ++gEstablished;
      ++gSilent;
      ++gActionCount[8];
      {
        std::lock_guard<std::mutex> g(gMu);
        ++gPorts[port].hits;
      }
      held.emplace_back(fd, nowS() + gHoldMs / 1000.0);
    }
    double t = nowS();
    for (size_t i = 0; i < held.size();) {
      if (held[i].second <= t || gStop) {
        close(held[i].first);
        held[i] = held.back();
        held.pop_back();
      } else {
        ++i;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string summaryLine() {
  std::string s = "summary attempted=" + std::to_string(gAttempted) + " established=" + std::to_string(gEstablished) +
                  " refused=" + std::to_string(gRefused) + " connect_timeout=" + std::to_string(gTimedOut) +
                  " dropped_by_server=" + std::to_string(gDropped) + " kept_open=" + std::to_string(gKept) +
                  " authenticated=" + std::to_string(gAuthOk);
  for (int i = 0; i < 9; ++i) s += std::string(" ") + kActionNames[i] + "=" + std::to_string(gActionCount[i]);
  std::lock_guard<std::mutex> g(gMu);
  long byService[4] = {0, 0, 0, 0};
  int portsByService[4] = {0, 0, 0, 0};
  for (auto& [pt, p] : gPorts) {
    int k = (p.service >= 1 && p.service <= 3) ? p.service : 0;
    byService[k] += p.hits;
    if (p.hits > 0) ++portsByService[k];
  }
  const char* names[4] = {"unknown", "root", "ring", "transport"};
  for (int k = 0; k < 4; ++k)
    s += std::string(" hits_") + names[k] + "=" + std::to_string(byService[k]) + " ports_" + names[k] + "=" +
         std::to_string(portsByService[k]);
  s += " ports_seen=" + std::to_string(gPorts.size());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> pids;
  int threads = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--pids") {
      for (char* tok = strtok(argv[i + 1], ","); tok; tok = strtok(nullptr, ",")) pids.push_back(atoi(tok));
    } else if (k == "--id") {
      hetcclUniqueId uid{};
      if (v.size() != 2 * sizeof(uid.internal)) {
        fprintf(stderr, "--id: expected %zu hex digits\n", 2 * sizeof(uid.internal));
        return 2;
      }
      for (size_t b = 0; b < sizeof(uid.internal); ++b)
        uid.internal[b] = static_cast<char>(std::stoi(v.substr(2 * b, 2), nullptr, 16));
      try {
        gId = hetccl::decodeUniqueId(uid);
        gHaveId = true;
        gRootPort = gId.root.port();
      } catch (const hetccl::Error& e) {
        fprintf(stderr, "--id: %s\n", e.what());
        return 2;
      }
    } else if (k == "--mode") {
      gMode = v;
    } else if (k == "--threads") {
      threads = atoi(v.c_str());
    } else if (k == "--hold-ms") {
      gHoldMs = atoi(v.c_str());
    } else if (k == "--per-port") {
      gPerPort = atoi(v.c_str());
    } else if (k == "--targets") {
      gTargets = v;
    } else {
      fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (pids.empty() || (gMode != "flood" && gMode != "silent")) {
    fprintf(stderr,
            "usage: %s --pids P1,P2,.. [--id HEX] [--mode flood|silent] [--threads N] [--hold-ms MS] "
            "[--per-port K] [--targets all|root|ranks]\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::thread> ts;
  ts.emplace_back(scanner, pids);
  if (gMode == "flood") {
    for (int t = 0; t < threads; ++t) ts.emplace_back(floodWorker, t);
    ts.emplace_back(watcher, 3.0);
  } else
    ts.emplace_back(silentWorker);
  std::thread reporter([] {
    while (!gStop) {
      size_t ports;
      {
        std::lock_guard<std::mutex> g(gMu);
        ports = gPorts.size();
      }
      printf("progress %ld %ld %zu\n", gAttempted.load(), gEstablished.load(), ports);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  char buf[256];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  gStop = true;
  for (auto& t : ts) t.join();
  reporter.join();
  {
    std::lock_guard<std::mutex> g(gMu);
    for (auto& [pt, p] : gPorts) printf("port %d %d %d %ld %.6f\n", pt, p.pid, p.service, p.hits, p.firstSeen);
  }
  printf("%s\n", summaryLine().c_str());
  return 0;
}
