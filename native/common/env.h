// Environment configuration read by the engine (the TS side documents each variable).
#pragma once
#include <cstdint>
#include <string>

namespace dtorch::common {

std::string envString(const char* name, const std::string& fallback);
int64_t envInt(const char* name, int64_t fallback);

}  // namespace dtorch::common
