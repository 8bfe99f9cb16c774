// Names the calling thread (Linux: at most 15 characters are kept).
#pragma once
#include <pthread.h>

#include <string>

namespace dtorch::common {

inline void setThreadName(const std::string& name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#else
  (void)name;
#endif
}

}  // namespace dtorch::common
