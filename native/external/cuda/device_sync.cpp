#include "external/cuda/device_sync.h"

#ifdef DTORCH_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace dtorch::external::cuda {

#ifdef DTORCH_WITH_CUDA

bool builtWithCuda() { return true; }

void bindWorkerThread(int index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, static_cast<c10::DeviceIndex>(index)));
}

std::shared_ptr<void> markReady(const at::Tensor& t) {
  if (!t.defined() || !t.is_cuda()) return nullptr;
  auto event = std::make_shared<at::cuda::CUDAEvent>();
  event->record(c10::cuda::getCurrentCUDAStream(t.device().index()));
  return event;
}

void waitFor(const std::shared_ptr<void>& ready, const at::Tensor& t) {
  if (!ready || !t.defined() || !t.is_cuda()) return;
  auto stream = c10::cuda::getCurrentCUDAStream();
  static_cast<at::cuda::CUDAEvent*>(ready.get())->block(stream);
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
}

void synchronizeThisThread() {
  if (c10::cuda::device_count() > 0) c10::cuda::getCurrentCUDAStream().synchronize();
}

#else

bool builtWithCuda() { return false; }
void bindWorkerThread(int) {}
std::shared_ptr<void> markReady(const at::Tensor&) { return nullptr; }
void waitFor(const std::shared_ptr<void>&, const at::Tensor&) {}
void synchronizeThisThread() {}

#endif

}  // namespace dtorch::external::cuda
