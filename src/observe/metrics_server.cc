#include "observe/metrics_server.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/json.h"
#include "core/log.h"
#include "core/settings.h"

#if HETCCL_HAVE_CIVETWEB
#include <civetweb.h>
#endif

namespace hetccl {
namespace {

std::mutex gMu;                      // the live communicators and the endpoint
std::vector<MetricsSource*> gComms;  // in attach order
int gPort = 0;

double wallS() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

std::string metricsText() {
  std::lock_guard<std::mutex> g(gMu);
  std::string out;
  out.reserve(16384);
  out +=
      "# HELP hetccl_comm_info A live communicator of this process (value 1): its size, group and paths\n"
      "# TYPE hetccl_comm_info gauge\n";
  for (MetricsSource* c : gComms) out += "hetccl_comm_info{" + c->metricsLabels() + "," + c->infoLabels() + "} 1\n";
  out +=
      "# HELP hetccl_comm_failed 1 once the communicator failed (its calls refuse until it is destroyed)\n"
      "# TYPE hetccl_comm_failed gauge\n";
  for (MetricsSource* c : gComms)
    out += "hetccl_comm_failed{" + c->metricsLabels() + "} " + (c->failedForGood() ? "1" : "0") + "\n";
  for (int f = 0; f < CallMetrics::families(); ++f)
    for (size_t i = 0; i < gComms.size(); ++i) gComms[i]->counters().render(f, gComms[i]->metricsLabels(), out, i == 0);
  return out;
}

std::string statusJson() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  char head[512];
  std::lock_guard<std::mutex> g(gMu);
  snprintf(head, sizeof(head),
           "{\"format\": \"hetccl-status-1\", \"pid\": %d, \"host\": %s, \"port\": %d, "
           "\"unix_s\": %.3f, \"comms\": [",
           static_cast<int>(getpid()), jsonQuoted(host).c_str(), gPort, wallS());
  std::string out = head;
  for (size_t i = 0; i < gComms.size(); ++i) out += (i ? ",\n  " : "\n  ") + gComms[i]->statusObject();
  return out + "]}\n";
}

#if HETCCL_HAVE_CIVETWEB
namespace {

// civetweb's functions, loaded at run time.
struct Civet {
  unsigned (*init)(unsigned);
  mg_context* (*start)(const mg_callbacks*, void*, const char**);
  void (*stop)(mg_context*);
  void (*setHandler)(mg_context*, const char*, mg_request_handler, void*);
  const mg_request_info* (*info)(const mg_connection*);
  int (*ok)(mg_connection*, const char*, long long);
  int (*write)(mg_connection*, const void*, size_t);
};
Civet gCivet;
mg_context* gCtx = nullptr;  // under gMu
thread_local bool tStarting = false;
std::string gStartError;  // civetweb's last log message while starting (under gMu)

bool loadCivet() {
  static bool tried = false, ok = false;
  if (tried) return ok;
  tried = true;
  const std::string lib = settings::kCivetwebLib.get();
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    LOG_WARN(kInit,
             "HETCCL_METRICS_PORT: cannot load %s (HETCCL_CIVETWEB_LIB; Debian: libcivetweb1): %s; no metrics "
             "endpoint",
             lib.c_str(), dlerror());
    return false;
  }
  auto sym = [&](const char* n) { return dlsym(h, n); };
  gCivet.init = reinterpret_cast<decltype(gCivet.init)>(sym("mg_init_library"));
  gCivet.start = reinterpret_cast<decltype(gCivet.start)>(sym("mg_start"));
  gCivet.stop = reinterpret_cast<decltype(gCivet.stop)>(sym("mg_stop"));
  gCivet.setHandler = reinterpret_cast<decltype(gCivet.setHandler)>(sym("mg_set_request_handler"));
  gCivet.info = reinterpret_cast<decltype(gCivet.info)>(sym("mg_get_request_info"));
  gCivet.ok = reinterpret_cast<decltype(gCivet.ok)>(sym("mg_send_http_ok"));
  gCivet.write = reinterpret_cast<decltype(gCivet.write)>(sym("mg_write"));
  ok = gCivet.init && gCivet.start && gCivet.stop && gCivet.setHandler && gCivet.info && gCivet.ok && gCivet.write;
  if (!ok) {
    LOG_WARN(kInit, "HETCCL_METRICS_PORT: %s lacks civetweb's functions (HETCCL_CIVETWEB_LIB); no metrics endpoint",
             lib.c_str());
    return false;
  }
  gCivet.init(0);
  return true;
}

void reply(mg_connection* conn, int code, const char* reason, const char* extra, const std::string& body) {
  char head[256];
  const int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n",
                         code, reason, extra, body.size());
  gCivet.write(conn, head, static_cast<size_t>(n));
  gCivet.write(conn, body.data(), body.size());
}

int handle(mg_connection* conn, void*) {
  const mg_request_info* ri = gCivet.info(conn);
  const char* method = ri && ri->request_method ? ri->request_method : "";
  const bool head = strcmp(method, "HEAD") == 0;
  if (strcmp(method, "GET") != 0 && !head) {
    reply(conn, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", "the hetccl metrics endpoint serves GET only\n");
    return 405;
  }
  const std::string uri = ri->local_uri ? ri->local_uri : "";
  std::string body;
  const char* type = "text/plain; charset=utf-8";
  if (uri == "/metrics") {
    body = metricsText();
    type = "text/plain; version=0.0.4; charset=utf-8";
  } else if (uri == "/status") {
    body = statusJson();
    type = "application/json";
  } else if (uri == "/") {
    body = "hetccl metrics endpoint\n/metrics  Prometheus text\n/status   communicators' state (JSON)\n";
  } else {
    reply(conn, 404, "Not Found", "", "no such path: /metrics, /status\n");
    return 404;
  }
  gCivet.ok(conn, type, static_cast<long long>(body.size()));
  if (!head) gCivet.write(conn, body.data(), body.size());
  return 200;
}

int logMessage(const mg_connection*, const char* message) {
  if (tStarting) gStartError = message ? message : "";  // mg_start logs on the caller's thread
  LOG_TRACE(kInit, "metrics endpoint: %s", message ? message : "");
  return 1;  // handled: civetweb prints nothing itself
}

// Under gMu.
void startEndpoint(MetricsSource* first) {
  const int base = settings::kMetricsPort.get();
  if (base <= 0 || gCtx || !loadCivet()) return;
  const int port = base + first->portOffset();
  const std::string addr = settings::kMetricsAddr.get();
  if (port > 65535) {
    LOG_WARN(kInit, "HETCCL_METRICS_PORT %d plus this rank's index on its host (%d) is past 65535: no metrics endpoint",
             base, first->portOffset());
    return;
  }
  const std::string listen =
      (addr.find(':') != std::string::npos ? "[" + addr + "]" : addr) + ":" + std::to_string(port);
  const char* options[] = {"listening_ports",   listen.c_str(), "num_threads", "2", "request_timeout_ms", "5000",
                           "enable_keep_alive", "no",           nullptr};
  mg_callbacks cb;
  memset(&cb, 0, sizeof(cb));
  cb.log_message = logMessage;
  gStartError.clear();
  tStarting = true;
  gCtx = gCivet.start(&cb, nullptr, options);
  tStarting = false;
  if (!gCtx) {
    LOG_WARN(kInit,
             "HETCCL_METRICS_PORT: cannot serve on %s (%s); no metrics endpoint in this process, collectives "
             "go on",
             listen.c_str(), gStartError.empty() ? "see HETCCL_METRICS_ADDR" : gStartError.c_str());
    return;
  }
  gCivet.setHandler(gCtx, "/", handle, nullptr);
  gPort = port;
  LOG_INFO(kInit, "metrics endpoint: http://%s/metrics and /status", listen.c_str());
}

// Under gMu; the handlers take gMu, so the context stops outside it.
mg_context* takeEndpoint() {
  mg_context* c = gCtx;
  gCtx = nullptr;
  gPort = 0;
  return c;
}

void stopEndpoint(mg_context* c) {
  if (c) gCivet.stop(c);
}

}  // namespace
#else
namespace {
struct mg_context;
void startEndpoint(MetricsSource*) {
  if (settings::kMetricsPort.get() > 0)
    LOG_WARN(kInit,
             "HETCCL_METRICS_PORT: this build has no metrics endpoint (civetweb's header was missing when it "
             "was built: Debian libcivetweb-dev)");
}
mg_context* takeEndpoint() { return nullptr; }
void stopEndpoint(mg_context*) {}
}  // namespace
#endif

void metricsAttach(MetricsSource* c) {
  std::lock_guard<std::mutex> g(gMu);
  gComms.push_back(c);
  startEndpoint(c);
}

void metricsDetach(MetricsSource* c) {
  mg_context* stop = nullptr;
  {
    std::lock_guard<std::mutex> g(gMu);
    auto it = std::find(gComms.begin(), gComms.end(), c);
    if (it == gComms.end()) return;
    gComms.erase(it);
    if (gComms.empty()) stop = takeEndpoint();
  }
  stopEndpoint(stop);
}

int metricsPort() {
  std::lock_guard<std::mutex> g(gMu);
  return gPort;
}

}  // namespace hetccl
