#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/settings.h"

namespace hetccl {
namespace {

struct LogState {
  std::atomic<int> level{-1};  // -1: not read yet
  std::atomic<unsigned> mask{kAll};
  std::atomic<int> rank{-1};
  char host[64] = {0};
};

LogState& state() {
  static LogState s;
  return s;
}

struct SubsysName {
  const char* name;
  unsigned bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kInit},       {"BOOTSTRAP", kBootstrap}, {"TOPO", kTopo},     {"TRANSPORT", kTransport},
    {"BACKEND", kBackend}, {"COLL", kColl},           {"DEVICE", kDevice}, {"ALL", kAll}};

const char* subsysName(unsigned subsys) {
  for (const auto& s : kSubsysNames)
    if (s.bit == subsys) return s.name;
  return "?";
}

unsigned parseMask(const std::string& spec) {
  if (spec.empty()) return kAll;
  bool negate = spec[0] == '^';
  unsigned mask = 0;
  size_t pos = negate ? 1 : 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    for (const auto& s : kSubsysNames)
      if (strcasecmp(item.c_str(), s.name) == 0) mask |= s.bit;
    pos = end + 1;
  }
  return negate ? ~mask : mask;
}

void readEnv() {
  LogState& s = state();
  // The logger never throws: a level the table refuses logs warnings, once
  // saying why.
  std::string lvl = "WARN";
  try {
    lvl = settings::kDebug.get();  // HETCCL_DEBUG, else NCCL_DEBUG
  } catch (const Error& e) {
    fprintf(stderr, "hetccl: %s; logging warnings\n", e.what());
  }
  int level = 0;
  if (strcasecmp(lvl.c_str(), "WARN") == 0 || strcasecmp(lvl.c_str(), "VERSION") == 0)
    level = 1;
  else if (strcasecmp(lvl.c_str(), "INFO") == 0)
    level = 2;
  else if (strcasecmp(lvl.c_str(), "TRACE") == 0)
    level = 3;
  s.mask = parseMask(settings::kDebugSubsys.get());
  gethostname(s.host, sizeof(s.host) - 1);
  s.level = level;
}

}  // namespace

bool logEnabled(LogLevel level, unsigned subsys) {
  LogState& s = state();
  int cur = s.level.load(std::memory_order_relaxed);
  if (cur < 0) {
    static std::once_flag once;
    std::call_once(once, readEnv);
    cur = s.level.load();
  }
  return static_cast<int>(level) <= cur && (s.mask.load(std::memory_order_relaxed) & subsys) != 0;
}

void logSetRank(int rank) { state().rank = rank; }

void logReset() { readEnv(); }

void logMessage(LogLevel level, unsigned subsys, const char* fmt, ...) {
  static const char* kLevel[] = {"", "WARN", "INFO", "TRACE"};
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  LogState& s = state();
  fprintf(stderr, "%s:%d:%d hetccl %s %s %s\n", s.host, getpid(), s.rank.load(), kLevel[static_cast<int>(level)],
          subsysName(subsys), buf);
}

}  // namespace hetccl
