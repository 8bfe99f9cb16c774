// LibTorch direct: `x = x + 1` on a [1] float32 tensor (CPU, or CUDA with argv[3] = "cuda") in a
// plain C++ loop, the floor that
// DTorch's pipelined completion cost is compared against. Prints one JSON line per variant:
//   libtorch_direct:        x = at::add(x, 1), the plain way
//   libtorch_direct_out:    at::add_out(x, x, wrapped 0-d scalar made per call): the in-place
//                           work DTorch's kernel does when the old x dies at the add
//   libtorch_direct_out_cached: the same with the wrapped scalar made once, as DTorch's worker
//                           keeps its recent scalars: LibTorch's own floor for this op
//   libtorch_cuda_dispatch_out (CUDA builds): at::cuda::add_out, past the dispatcher
//   dtorch_scalar_kernel_launch (CUDA builds): DTorch's own scalar kernel launched from this
//                           loop, the floor of a DTorch worker that runs it
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#ifdef DTORCH_WITH_CUDA
#include <ATen/ops/add_cuda_dispatch.h>
#include <c10/cuda/CUDAStream.h>

#include "external/cuda/kernels/scalar_elementwise.h"
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace {

double bestOf(int repeats, long iters, const at::Device& device, const std::function<at::Tensor(at::Tensor&)>& step) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    at::Tensor x = at::zeros({1}, at::TensorOptions().device(device));
    (void)x.item<double>();  // start timing with the device idle
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) x = step(x);
    const double value = x.item<double>();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / iters;
    if (value != static_cast<double>(iters)) {
      std::fprintf(stderr, "wrong result %f\n", value);
      std::exit(1);
    }
    if (ns < best) best = ns;
  }
  return best;
}

void print(const char* side, const char* device, long iters, double ns) {
  std::printf("{\"bench\":\"overhead\",\"side\":\"%s\",\"device\":\"%s\",\"op\":\"add_scalar\",\"shape\":[1],\"iters\":%ld,\"ns_per_op\":%.1f}\n",
              side, device, iters, ns);
}

}  // namespace

int main(int argc, char** argv) {
  const long iters = argc > 1 ? std::atol(argv[1]) : 200000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const char* deviceName = argc > 3 ? argv[3] : "cpu";
  const at::Device device(deviceName);
  at::set_num_threads(1);
  c10::InferenceMode guard;
  print("libtorch_direct", deviceName, iters, bestOf(repeats, iters, device, [](at::Tensor& x) { return at::add(x, 1); }));
  print("libtorch_direct_out", deviceName, iters, bestOf(repeats, iters, device, [](at::Tensor& x) {
          at::Tensor one = at::scalar_tensor(1, at::TensorOptions().dtype(x.scalar_type()));
          one.unsafeGetTensorImpl()->set_wrapped_number(true);
          return at::add_out(x, x, one);
        }));
  at::Tensor one = at::scalar_tensor(1, at::TensorOptions().dtype(at::kFloat));
  one.unsafeGetTensorImpl()->set_wrapped_number(true);
  print("libtorch_direct_out_cached", deviceName, iters, bestOf(repeats, iters, device, [&](at::Tensor& x) { return at::add_out(x, x, one); }));
#ifdef DTORCH_WITH_CUDA
  if (device.is_cuda()) {
    print("libtorch_cuda_dispatch_out", deviceName, iters, bestOf(repeats, iters, device, [&](at::Tensor& x) { return at::cuda::add_out(x, x, one); }));
    namespace k = dtorch::external::cuda::kernels;
    print("dtorch_scalar_kernel_launch", deviceName, iters, bestOf(repeats, iters, device, [&](at::Tensor& x) {
            k::scalarOp(k::ScalarOp::kAdd, k::FloatType::kFloat32, x.data_ptr(), x.data_ptr(), x.numel(), 1.f, c10::cuda::getCurrentCUDAStream().stream());
            return x;
          }));
  }
#endif
  return 0;
}
