#include "harness.h"

#include "forked_ranks.h"
#include "free_port.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>

namespace hmp {
namespace {

// Wire format child -> parent: one line per record, "<kind> <text>\n";
// newlines inside text travel as \x1e.
//   F failure text   P progress step   S label value   D (body finished)
int gReportFd = -1;

void sendLine(char kind, const std::string& text) {
  if (gReportFd < 0) return;
  std::string line(1, kind);
  line += ' ';
  for (char c : text) line += c == '\n' ? '\x1e' : c;
  line += '\n';
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t w = write(gReportFd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // parent gone: nothing to report to
    p += w;
    left -= static_cast<size_t>(w);
  }
}

// In a child, every gtest failure goes to the parent instead of stdout.
class ChildReporter : public ::testing::EmptyTestEventListener {
 public:
  static constexpr int kMaxReported = 25;  // a broken collective fails every check: keep the log readable
  int failures = 0;
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    if (++failures > kMaxReported) return;
    std::string where = r.file_name() ? std::string(r.file_name()) + ":" + std::to_string(r.line_number()) + ": " : "";
    sendLine('F', where + r.message());
  }
};

// Values reported under one label: (rank, value), every report of every rank.
using SameValues = std::map<std::string, std::vector<std::pair<int, uint64_t>>>;

struct Child {
  std::vector<std::string> failures;
  std::string lastStep = "(not started)";
  bool done = false;
};

[[noreturn]] void runChild(int rank, int nranks, const std::vector<std::string>& layout, const JobOptions& opt,
                           const hetcclUniqueId& id, const std::function<void(Rank&)>& body) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed test process
  setenv("HETCCL_TIMEOUT_S", "30", 1);
  for (const auto& [k, v] : opt.env) setenv(k.c_str(), v.c_str(), 1);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* reporter = new ChildReporter;
  listeners.Append(reporter);

  Rank r;
  r.rank = rank;
  r.nranks = nranks;
  r.layout = layout;
  r.group = layout[rank];
  r.transport = opt.transport;
  if (!opt.devices.empty()) r.device = opt.devices.at(static_cast<size_t>(rank));
  // "ucx_tcp", "ucx_sm": the ucx transport over those UCX transports only;
  // "..._rma": with its RMA path from 1 MiB; "ofi_..._rma": the ofi
  // transport writing every message of 1 byte and up by RMA.
  if (r.transport.size() > 4 && r.transport.compare(r.transport.size() - 4, 4, "_rma") == 0) {
    if (r.transport.rfind("ofi_", 0) == 0)
      setenv("HETCCL_OFI_RMA_MIN", "1", 1);
    else
      setenv("HETCCL_UCX_RMA_MIN", "1M", 1);
    r.transport.resize(r.transport.size() - 4);
  }
  // "..._planfold": border data folded by the plan after whole receives
  // (HETCCL_PLAN_FOLDS), the plan's own folds.
  const std::string planFold = "_planfold";
  if (r.transport.size() > planFold.size() &&
      r.transport.compare(r.transport.size() - planFold.size(), planFold.size(), planFold) == 0) {
    setenv("HETCCL_PLAN_FOLDS", "1", 1);
    r.transport.resize(r.transport.size() - planFold.size());
  }
  // "..._bwcut": AllReduce across groups cut by border bandwidth, from
  // rates given per rank (unequal inside every group: uneven shards);
  // "..._bwprobe": from rates measured at init.
  for (const char* cut : {"_bwcut", "_bwprobe"}) {
    const std::string sfx = cut;
    if (r.transport.size() <= sfx.size() || r.transport.compare(r.transport.size() - sfx.size(), sfx.size(), sfx) != 0)
      continue;
    setenv("HETCCL_BORDER_CUT", "bandwidth", 1);
    setenv("HETCCL_BORDER_PROBE_BYTES", "256K", 1);
    if (sfx == "_bwcut") setenv("HETCCL_LINK_GBPS", std::to_string(5 + (rank * 11) % 40).c_str(), 1);
    r.transport.resize(r.transport.size() - sfx.size());
  }
  // "shm_chunked": shm with 3 threads sharing each single-copy read, and
  // AllReduce across groups in chunks of 1 MiB.
  if (r.transport == "shm_chunked") {
    setenv("HETCCL_HOST_THREADS", "3", 1);
    setenv("HETCCL_CHUNK_BYTES", "1M", 1);
    r.transport = "shm";
  }
  // "..._reg": the ofi transport registers every buffer (HETCCL_OFI_REGISTER),
  // as it does where a provider asks (FI_MR_LOCAL: EFA).
  const std::string reg = "_reg";
  if (r.transport.size() > reg.size() && r.transport.compare(r.transport.size() - reg.size(), reg.size(), reg) == 0) {
    setenv("HETCCL_OFI_REGISTER", "1", 1);
    r.transport.resize(r.transport.size() - reg.size());
  }
  // "ofi_tcp", "ofi_shm": the ofi transport over that libfabric provider
  // (tcp on the loopback only: never the machine's own interfaces).
  if (r.transport.rfind("ofi_", 0) == 0) {
    setenv("FI_PROVIDER", r.transport.substr(4).c_str(), 1);
    setenv("FI_TCP_IFACE", "lo", 1);
    r.transport = "ofi";
  }
  if (r.transport.rfind("ucx_", 0) == 0) {
    setenv("UCX_TLS", r.transport.substr(4).c_str(), 1);
    r.transport = "ucx";
  }
  try {
    if (r.device != "host") {
      int n = 0;
      HC_ASSERT_OK(hetcclDeviceCount(r.device.c_str(), &n), nullptr);
      if (n <= 0) {
        ADD_FAILURE() << "no " << r.device << " device";
        throw AbortRank{};
      }
      HC_ASSERT_OK(hetcclDeviceSet(r.device.c_str(), rank % n), nullptr);
      HC_ASSERT_OK(hetcclStreamCreate(r.device.c_str(), &r.stream), nullptr);
    }
    if (opt.initComm) {
      hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
      if (!opt.devices.empty()) cfg.device = r.device.c_str();  // else HETCCL_DEVICE's
      if (r.group != "-") cfg.groupName = r.group.c_str();      // "-": the environment's (HETCCL_GROUP_MAP...)
      cfg.transport = r.transport.c_str();
      if (opt.beforeInit) opt.beforeInit(rank);
      r.progress("hetcclCommInitRankConfig");
      hetcclResult_t res = hetcclCommInitRankConfig(&r.comm, nranks, id, rank, &cfg);
      if (opt.initMayFail && res != hetcclSuccess) {
        r.initResult = res;
        r.initError = hetcclGetLastError(nullptr);
        r.comm = nullptr;
      } else {
        HC_ASSERT_OK(res, nullptr);
      }
    }
    r.progress("test body");
    body(r);
    if (r.comm) {
      r.progress("hetcclCommFinalize, hetcclCommDestroy");
      HC_EXPECT_OK(hetcclCommFinalize(r.comm), r.comm);
      HC_EXPECT_OK(hetcclCommDestroy(r.comm), r.comm);
    }
    if (r.stream) HC_EXPECT_OK(hetcclStreamDestroy(r.device.c_str(), r.stream), nullptr);
  } catch (const AbortRank&) {
    // already recorded
  } catch (const std::exception& e) {
    ADD_FAILURE() << "exception: " << e.what();
  }
  if (reporter->failures > ChildReporter::kMaxReported)
    sendLine('F', "... and " + std::to_string(reporter->failures - ChildReporter::kMaxReported) +
                      " more failures on this rank");
  sendLine('D', "");
  fflush(nullptr);
  // _exit: no static destructors or gtest teardown of the parent's state.
  _exit(reporter->failures ? 1 : 0);
}

void handleLine(Child& c, int rank, const std::string& line, SameValues& same) {
  if (line.size() < 2) return;
  std::string text = line.substr(2);
  std::replace(text.begin(), text.end(), '\x1e', '\n');
  switch (line[0]) {
    case 'F': c.failures.push_back(text); break;
    case 'P': c.lastStep = text; break;
    case 'D': c.done = true; break;
    case 'S': {
      size_t sp = text.rfind(' ');
      same[text.substr(0, sp)].emplace_back(rank, std::stoull(text.substr(sp + 1), nullptr, 16));
      break;
    }
    default: c.failures.push_back("unparsable report: " + line);
  }
}

}  // namespace

std::vector<std::string> parseDevices(const std::string& devices) { return parseLayout(devices); }

DeviceBuffer::DeviceBuffer(const Rank& r, size_t bytes) : kind_(r.device), bytes_(bytes) {
  hetcclResult_t res = hetcclDeviceAlloc(kind_.c_str(), &p_, bytes ? bytes : 1);
  if (res != hetcclSuccess) {
    ADD_FAILURE() << callFailure("hetcclDeviceAlloc", res, nullptr);
    throw AbortRank{};
  }
}

DeviceBuffer::~DeviceBuffer() { hetcclDeviceFree(kind_.c_str(), p_); }

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  EXPECT_LE(offset + bytes, bytes_);
  HC_ASSERT_OK(hetcclDeviceCopy(kind_.c_str(), static_cast<uint8_t*>(p_) + offset, src, bytes), nullptr);
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  EXPECT_LE(offset + bytes, bytes_);
  HC_ASSERT_OK(hetcclDeviceCopy(kind_.c_str(), dst, static_cast<const uint8_t*>(p_) + offset, bytes), nullptr);
}

std::vector<uint8_t> DeviceBuffer::bytes() const {
  std::vector<uint8_t> v(bytes_);
  download(v.data(), bytes_);
  return v;
}

std::string testGpuKind() {
  const char* k = getenv("HETCCL_TEST_GPU");
  return k && *k ? k : "emu";
}

void syncStream(const Rank& r) {
  if (r.stream) HC_ASSERT_OK(hetcclStreamSynchronize(r.device.c_str(), r.stream), nullptr);
}

std::string layoutTag(const std::string& layout) {
  std::string out;
  for (char c : layout)
    if (isalnum(static_cast<unsigned char>(c))) out += c;
  return out;
}

void Rank::progress(const std::string& what) const { sendLine('P', what); }

void Rank::reportSame(const std::string& label, uint64_t value) const {
  char hex[24];
  snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(value));
  sendLine('S', scope + label + " " + hex);
}

std::vector<std::string> Rank::groupNames() const {
  std::vector<std::string> out;
  for (const auto& g : layout)
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  return out;
}

std::string callFailure(const char* call, hetcclResult_t r, hetcclComm_t comm) {
  return std::string(call) + " returned " + std::to_string(r) + " (" + hetcclGetErrorString(r) +
         "): " + hetcclGetLastError(comm);
}

void expectError(hetcclResult_t got, hetcclResult_t want, hetcclComm_t comm, const std::string& word,
                 const char* call) {
  std::string text = hetcclGetLastError(comm);
  EXPECT_EQ(got, want) << call << ": " << text;
  EXPECT_NE(text.find(word), std::string::npos) << call << ": last error \"" << text << "\" does not name " << word;
}

uint64_t hashBytes(const void* p, size_t n) {
  // FNV-1a over 8-byte words (then the tail bytes): fast on large buffers.
  uint64_t h = 1469598103934665603ull ^ n;
  auto* b = static_cast<const uint8_t*>(p);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

void runJob(const std::string& layoutText, const JobOptions& opt, const std::function<void(Rank&)>& body) {
  const std::vector<std::string> layout = parseLayout(layoutText);
  const int n = static_cast<int>(layout.size());
  const std::string job = "[" + layoutText + " " + opt.transport + "]";
  // The rendezvous root runs in this process: give it the children's timeout.
  setenv("HETCCL_TIMEOUT_S", "30", 0);

  // The ranks are forked before the id exists and read it from a pipe
  // (forked_ranks.h says why).
  std::vector<Child> kids(n);
  hetccl_tools::ForkedRanks procs;
  std::string startError;
  const bool started = procs.start(
      n, true,
      [&](int rank, int reportFd, int idFd) {
        hetcclUniqueId id{};
        if (!hetccl_tools::readId(idFd, &id)) _exit(3);  // the parent is gone
        gReportFd = reportFd;
        runChild(rank, n, layout, opt, id, body);
      },
      &startError);
  ASSERT_TRUE(started) << startError;
  hetcclUniqueId id{};
  if (opt.initComm) {
    hetcclResult_t r = hetcclGetUniqueId(&id);
    EXPECT_EQ(r, hetcclSuccess) << callFailure("hetcclGetUniqueId", r, nullptr);
  }
  EXPECT_TRUE(procs.sendId(id)) << strerror(errno);

  SameValues same;
  auto onLine = [&](int rank, const std::string& line) { handleLine(kids[rank], rank, line, same); };
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::seconds(opt.deadlineS);
  bool timedOut = false;
  std::vector<bool> seenEnd(n, false);
  while (procs.anyOpen()) {
    if (Clock::now() >= deadline) {
      timedOut = true;
      break;
    }
    procs.pump(200, onLine);
    // A rank that failed and exited leaves its peers waiting: they report a
    // remote error within HETCCL_TIMEOUT_S (30 s); don't wait the whole deadline.
    for (int i = 0; i < n; ++i) {
      if (seenEnd[i] || !procs.ended(i)) continue;
      seenEnd[i] = true;
      const int st = procs.status(i);
      if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        deadline = std::min(deadline, Clock::now() + std::chrono::seconds(45));
    }
  }
  if (timedOut) procs.killRemaining();
  while (!procs.allEnded() || procs.anyOpen()) procs.pump(50, onLine);  // what they wrote before they ended

  for (int i = 0; i < n; ++i) {
    const Child& c = kids[i];
    const int status = procs.status(i);
    std::string who = job + " rank " + std::to_string(i) + " (group " + layout[i] + "): ";
    for (const auto& f : c.failures) ADD_FAILURE() << who << f;
    if (timedOut && !c.done)
      ADD_FAILURE() << who << "still running after the " << opt.deadlineS
                    << " s deadline (killed); last step: " << c.lastStep;
    else if (WIFSIGNALED(status) && !(i == opt.killedRank && WTERMSIG(status) == SIGKILL))
      ADD_FAILURE() << who << "died of signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status))
                    << "); last step: " << c.lastStep;
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && c.failures.empty())
      ADD_FAILURE() << who << "exited with code " << WEXITSTATUS(status) << "; last step: " << c.lastStep;
  }
  // A failed job's ranks that exited 0 and reported nothing: say whether
  // they finished, so that a peer's "rank N died" is read right (a rank
  // that did its part may end before the others).
  if (::testing::Test::HasFailure())
    for (int i = 0; i < n; ++i) {
      const int status = procs.status(i);
      if (kids[i].failures.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        fprintf(stderr, "%s rank %d (group %s): %s; last step: %s\n", job.c_str(), i, layout[i].c_str(),
                kids[i].done ? "finished its body and exited 0" : "exited 0 before its body finished",
                kids[i].lastStep.c_str());
    }
  int reported = 0;
  for (const auto& [label, byRank] : same) {
    bool agree =
        std::all_of(byRank.begin(), byRank.end(), [&](const auto& rv) { return rv.second == byRank.front().second; });
    if (agree || ++reported > 10) continue;
    std::ostringstream os;
    for (const auto& [r, v] : byRank) os << " rank " << r << "=" << std::hex << v << std::dec;
    ADD_FAILURE() << job << " ranks disagree on " << label << ":" << os.str();
  }
}

uint16_t freePortPair() { return hetccl_test::freePortPair(); }

}  // namespace hmp
