// Leveled logging to stderr, set by DTORCH_LOG=debug|info|warn|error (default warn).
#pragma once
#include <sstream>
#include <string>

namespace dtorch::common {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel logLevel();
void setLogLevel(LogLevel level);
LogLevel parseLogLevel(const std::string& name, LogLevel fallback);
void logLine(LogLevel level, const std::string& line);

}  // namespace dtorch::common

// Only formats the message when the level is enabled.
#define DTORCH_LOG(level, expr)                                                  \
  do {                                                                           \
    if (static_cast<int>(level) >= static_cast<int>(::dtorch::common::logLevel())) { \
      std::ostringstream dtorch_log_os_;                                         \
      dtorch_log_os_ << expr;                                                    \
      ::dtorch::common::logLine(level, dtorch_log_os_.str());                    \
    }                                                                            \
  } while (0)
