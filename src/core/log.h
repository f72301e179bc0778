// One logger for the whole library: levels, subsystems, one line per message
// on stderr, prefixed with host, pid and rank. Configured by HETCCL_DEBUG
// (WARN|INFO|TRACE; NCCL_DEBUG is read when unset) and HETCCL_DEBUG_SUBSYS
// (comma list, ^ prefix negates, ALL by default).
#pragma once

#include <cstdarg>

namespace hetccl {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

enum LogSubsys : unsigned {
  kInit = 1u << 0,
  kBootstrap = 1u << 1,
  kTopo = 1u << 2,
  kTransport = 1u << 3,
  kBackend = 1u << 4,
  kColl = 1u << 5,
  kDevice = 1u << 6,
  kAll = ~0u
};

bool logEnabled(LogLevel level, unsigned subsys);
void logSetRank(int rank);
[[gnu::format(printf, 3, 4)]] void logMessage(LogLevel level, unsigned subsys, const char* fmt, ...);
// Re-reads the environment (tests change it).
void logReset();

}  // namespace hetccl

#define HETCCL_LOG(level, subsys, ...)                                                         \
  do {                                                                                         \
    if (::hetccl::logEnabled(level, subsys)) ::hetccl::logMessage(level, subsys, __VA_ARGS__); \
  } while (0)
#define LOG_WARN(subsys, ...) HETCCL_LOG(::hetccl::LogLevel::kWarn, subsys, __VA_ARGS__)
#define LOG_INFO(subsys, ...) HETCCL_LOG(::hetccl::LogLevel::kInfo, subsys, __VA_ARGS__)
#define LOG_TRACE(subsys, ...) HETCCL_LOG(::hetccl::LogLevel::kTrace, subsys, __VA_ARGS__)
