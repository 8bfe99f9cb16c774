// CHECK for the C++ tests (no test framework: they run under ctest): prints the failed condition
// with its place and makes the function return 1. Include it after LibTorch's headers: c10's
// logging has a CHECK of its own, which this one replaces.
#pragma once
#include <cstdio>

#ifdef CHECK
#undef CHECK
#endif

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)
