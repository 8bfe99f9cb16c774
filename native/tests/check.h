// CHECK for the C++ tests (no test framework: they run under ctest with LibTorch absent):
// prints the failed condition with its place and makes main() return 1.
#pragma once
#include <cstdio>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)
