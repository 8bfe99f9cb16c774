#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "common/env.h"

namespace dtorch::common {
namespace {
std::atomic<int> gLevel{static_cast<int>(parseLogLevel(envString("DTORCH_LOG", "warn"), LogLevel::kWarn))};
std::mutex gWriteMutex;
const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    default: return "off";
  }
}
}  // namespace

LogLevel logLevel() { return static_cast<LogLevel>(gLevel.load(std::memory_order_relaxed)); }
void setLogLevel(LogLevel level) { gLevel.store(static_cast<int>(level)); }

LogLevel parseLogLevel(const std::string& name, LogLevel fallback) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off" || name == "silent") return LogLevel::kOff;
  return fallback;
}

void logLine(LogLevel level, const std::string& line) {
  std::lock_guard<std::mutex> lock(gWriteMutex);
  std::fprintf(stderr, "[dtorch native %s] %s\n", levelName(level), line.c_str());
}

}  // namespace dtorch::common
