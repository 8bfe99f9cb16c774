// LibTorch direct: `x = x + 1` on a [1] float32 CPU tensor in a plain C++ loop, the floor
// that DTorch's pipelined completion cost is compared against. Prints one JSON line.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const long iters = argc > 1 ? std::atol(argv[1]) : 200000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  at::set_num_threads(1);
  c10::InferenceMode guard;
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    at::Tensor x = at::zeros({1});
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) x = at::add(x, 1);
    const double value = x.item<double>();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / iters;
    if (value != static_cast<double>(iters)) {
      std::fprintf(stderr, "wrong result %f\n", value);
      return 1;
    }
    if (ns < best) best = ns;
  }
  std::printf("{\"bench\":\"overhead\",\"side\":\"libtorch_direct\",\"op\":\"add_scalar\",\"shape\":[1],\"iters\":%ld,\"ns_per_op\":%.1f}\n",
              iters, best);
  return 0;
}
