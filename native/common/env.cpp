#include "common/env.h"

#include <cstdlib>

namespace dtorch::common {

std::string envString(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  return (end && *end == '\0') ? static_cast<int64_t>(parsed) : fallback;
}

}  // namespace dtorch::common
