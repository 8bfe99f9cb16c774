#include "external/cuda/device_sync.h"

#include "external/cuda/row_copies.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <set>
#include <thread>

#ifdef DTORCH_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <sys/prctl.h>
#endif

namespace dtorch::external::cuda {

namespace {
// CPU workers share memory: a pull is a plain copy, done when it returns.
bool copyOnCpu(at::Tensor& dst, const at::Tensor& src) {
  if (dst.sizes() != src.sizes() || dst.scalar_type() != src.scalar_type()) return false;
  dst.copy_(src);
  return true;
}
}  // namespace

#ifdef DTORCH_WITH_CUDA

namespace {

// A CUDA event without timing (the cheap kind), destroyed with its last marker.
class Event {
 public:
  Event() { C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~Event() { cudaEventDestroy(event_); }  // legal while pending: CUDA releases it once reached
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const c10::cuda::CUDAStream& stream) { C10_CUDA_CHECK(cudaEventRecord(event_, stream.stream())); }
  void block(const c10::cuda::CUDAStream& stream) const { C10_CUDA_CHECK(cudaStreamWaitEvent(stream.stream(), event_, 0)); }
  bool query() const {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) C10_CUDA_CHECK(status);
    (void)cudaGetLastError();  // "not ready" must not surface as a later kernel's error
    return false;
  }

 private:
  cudaEvent_t event_{};
};

// A new event recorded at this point of `stream`: a marker shared by whoever waits for it.
std::shared_ptr<Event> recordedOn(const c10::cuda::CUDAStream& stream) {
  auto event = std::make_shared<Event>();
  event->record(stream);
  return event;
}

struct WorkerStreams {
  c10::cuda::CUDAStream compute;
  c10::cuda::CUDAStream communication;
  // Reads to host memory. Never captured into a CUDA graph: the pinned block of a read is freed
  // later on the reader's thread, and LibTorch's host allocator then records an event on every
  // stream the block was copied on. Recorded on the compute stream while this worker captured a
  // graph, that event would join the capture, and the allocator's next query of it would fail
  // every later read with "invalid argument".
  c10::cuda::CUDAStream readback;
  // Copies from host memory onto the GPU (UploadScope): off the compute stream, so that an
  // offloaded weight's copy overlaps the kernels queued before it; not the communication stream,
  // whose collectives would queue behind a large copy.
  c10::cuda::CUDAStream upload;
};
thread_local std::optional<WorkerStreams> streams;  // set on CUDA worker threads only

// Buffers of other GPUs this worker's queued copies still read, with the marker of their end.
struct HeldForCopy {
  std::shared_ptr<Event> done;
  std::vector<at::Tensor> tensors;
};
thread_local std::vector<HeldForCopy> heldForCopies;

// The ends of this worker's batches still running on the GPU, by batch number.
struct BatchEnd {
  uint64_t number;
  std::shared_ptr<Event> compute, communication;
};
thread_local std::deque<BatchEnd> batchEnds;
thread_local uint64_t batchesEndedCount = 0;

// Polls `done` until it holds or `timeout` passes: a spin of `spin`, then short sleeps (each
// wakes within a few microseconds of its 20: the worker's timer slack is 1 us, bindWorkerThread).
template <typename Done>
bool pollUntil(Done&& done, std::chrono::milliseconds timeout, std::chrono::microseconds spin = std::chrono::microseconds(200)) {
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) return false;
    if (waited < spin) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

// A sync or read the program waits for spins this long before it sleeps: the end of a short
// forward waited for (a text encoder's, a diffusion step's last kernels) is then seen at once,
// where a sleep would add the time a sleeping thread takes to wake to every wait.
constexpr std::chrono::microseconds kWaitSpin(2000);

bool onCudaWorker(const at::Tensor& t) { return streams && t.defined() && t.is_cuda(); }

// A copy's last step: hands the pinned tensor on from a CUDA driver thread.
struct HostDelivery {
  at::Tensor host;
  std::function<void(at::Tensor)> then;
};

void CUDART_CB deliverHost(void* data) {
  std::unique_ptr<HostDelivery> d(static_cast<HostDelivery*>(data));
  // `then` takes the only reference: the pinned block is released later, on the reader's thread
  // (freeing it here would call CUDA from a host callback, which CUDA forbids)
  d->then(std::move(d->host));
}

}  // namespace

bool builtWithCuda() { return true; }

void bindWorkerThread(int index) {
  const auto device = static_cast<c10::DeviceIndex>(index);
  c10::cuda::set_device(device);
  // the communication stream has the higher priority: a collective's few blocks get SMs while
  // a large matmul is running, which is what lets the two overlap
  streams = WorkerStreams{c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device),
                          c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device),
                          c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device),
                          c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)};
  c10::cuda::setCurrentCUDAStream(streams->compute);
  prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: its polls' short sleeps end on time (pollUntil)
}

std::shared_ptr<void> markReady(const at::Tensor& t) {
  if (!t.defined() || !t.is_cuda()) return nullptr;
  const c10::cuda::CUDAGuard onItsDevice(t.device().index());  // an event records on its own device
  return recordedOn(c10::cuda::getCurrentCUDAStream(t.device().index()));
}

void waitFor(const std::shared_ptr<void>& ready, const at::Tensor& t) {
  if (!ready || !t.defined() || !t.is_cuda()) return;
  auto stream = c10::cuda::getCurrentCUDAStream();
  static_cast<const Event*>(ready.get())->block(stream);
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
}

bool synchronizeThisThread(std::chrono::milliseconds timeout) {
  if (!streams) return true;
  // poll rather than block, so that a GPU that never finishes (a peer that never joined a
  // collective) turns into an error instead of a hung worker
  if (!pollUntil([] { return streams->compute.query() && streams->communication.query() && streams->readback.query() && streams->upload.query(); }, timeout,
                 kWaitSpin)) {
    return false;
  }
  heldForCopies.clear();  // every copy of this worker is done
  batchEnds.clear();
  return true;
}

uint64_t batchesEnded() { return batchesEndedCount; }

bool endBatch(int inFlight, std::chrono::milliseconds timeout) {
  if (!streams) return true;
  batchEnds.push_back(BatchEnd{batchesEndedCount++, recordedOn(streams->compute), recordedOn(streams->communication)});
  while (static_cast<int>(batchEnds.size()) > inFlight) {
    const BatchEnd& end = batchEnds.front();
    if (!pollUntil([&] { return end.compute->query() && end.communication->query(); }, timeout)) return false;
    batchEnds.pop_front();
  }
  releaseFinished();
  return true;
}

CommunicationScope::CommunicationScope(c10::ArrayRef<at::Tensor> inputs, uint64_t producedInBatch,
                                       c10::ArrayRef<std::shared_ptr<void>> made) {
  for (const at::Tensor& t : inputs) active_ = active_ || onCudaWorker(t);
  if (!active_) return;
  const bool allMade = !made.empty() && std::all_of(made.begin(), made.end(), [](const auto& m) { return m != nullptr; });
  if (allMade) {
    for (const auto& m : made) static_cast<const Event*>(m.get())->block(streams->communication);
  } else if (producedInBatch == kNoComputeWork) {
    // the caller orders its reads itself
  } else if (producedInBatch >= batchesEndedCount) {
    Event queued;  // made in the batch running now: after everything queued so far
    queued.record(streams->compute);
    queued.block(streams->communication);
  } else {
    // made in an earlier batch: after its end, unless that has passed (no longer listed)
    for (const BatchEnd& end : batchEnds) {
      if (end.number == producedInBatch) end.compute->block(streams->communication);
    }
  }
  for (const at::Tensor& t : inputs) {
    // the compute stream may free and reuse an input as soon as its blob is dropped
    if (t.defined() && t.is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), streams->communication);
  }
  c10::cuda::setCurrentCUDAStream(streams->communication);
}

CommunicationScope::~CommunicationScope() {
  if (active_) c10::cuda::setCurrentCUDAStream(streams->compute);
}

std::shared_ptr<void> CommunicationScope::finish() {
  if (!active_) return nullptr;
  return recordedOn(streams->communication);
}

UploadScope::UploadScope(bool when) : active_(when && streams) {
  if (active_) c10::cuda::setCurrentCUDAStream(streams->upload);
}

UploadScope::~UploadScope() {
  if (active_) c10::cuda::setCurrentCUDAStream(streams->compute);
}

std::shared_ptr<void> UploadScope::finish() {
  if (!active_) return nullptr;
  return recordedOn(streams->upload);
}

bool copyBetweenDevices(at::Tensor& dst, const at::Tensor& src) {
  if (!src.is_cuda() && !dst.is_cuda()) return copyOnCpu(dst, src);
  if (dst.sizes() != src.sizes() || dst.scalar_type() != src.scalar_type()) return false;
  const auto list = [](at::IntArrayRef v) { return std::vector<int64_t>(v.begin(), v.end()); };
  const auto copies = planRowCopies(list(src.sizes()), list(src.strides()), list(dst.strides()));
  if (!copies) return false;
  const size_t element = src.element_size();
  char* to = static_cast<char*>(dst.data_ptr());
  const char* from = static_cast<const char*>(src.const_data_ptr());
  for (const RowCopy& c : *copies) {
    C10_CUDA_CHECK(cudaMemcpy2DAsync(to + c.dstOffset * element, c.dstPitch * element, from + c.srcOffset * element, c.srcPitch * element,
                                     c.width * element, c.rows, cudaMemcpyDefault, c10::cuda::getCurrentCUDAStream()));
  }
  return true;
}

void enablePeerAccess(int peer) {
  const int here = c10::cuda::current_device();
  if (peer == here) return;
  // each worker thread enables access from its own GPU only, so a set per thread needs no lock
  // on this per-collective path (another thread finding it enabled already is handled below)
  thread_local std::set<std::pair<int, int>> enabled;  // (from, to)
  if (!enabled.insert({here, peer}).second) return;
  int possible = 0;
  C10_CUDA_CHECK(cudaDeviceCanAccessPeer(&possible, here, peer));
  if (!possible) return;  // copies still work, staged by the driver
  const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // "already enabled" must not surface as a later kernel's error
  } else {
    C10_CUDA_CHECK(status);
  }
}

void keepUntilDone(std::vector<at::Tensor> tensors) {
  if (!streams) return;  // a CPU worker: its copies are done already
  heldForCopies.push_back({recordedOn(c10::cuda::getCurrentCUDAStream()), std::move(tensors)});
}

void releaseFinished() {
  if (heldForCopies.empty()) return;
  std::erase_if(heldForCopies, [](const HeldForCopy& h) { return h.done->query(); });
}

void copyToHost(const at::Tensor& t, std::function<void(at::Tensor host)> then) {
  if (!t.is_cuda()) {
    then(t.to(at::kCPU).contiguous());
    return;
  }
  const at::Tensor src = t.contiguous();
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU).pinned_memory(true));
  c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream();
  if (streams && stream == streams->compute) {
    // on the worker's read stream (see WorkerStreams), after the work that made `src`; the
    // compute stream may free and reuse `src` meanwhile only once the copy has read it
    recordedOn(stream)->block(streams->readback);
    stream = streams->readback;
    c10::cuda::CUDACachingAllocator::recordStream(src.storage().data_ptr(), stream);
  }
  {
    const c10::cuda::CUDAStreamGuard onStream(stream);
    host.copy_(src, /*non_blocking=*/true);
  }
  auto* delivery = new HostDelivery{std::move(host), std::move(then)};
  const cudaError_t status = cudaLaunchHostFunc(stream.stream(), deliverHost, delivery);
  if (status != cudaSuccess) {
    std::unique_ptr<HostDelivery> owned(delivery);
    C10_CUDA_CHECK(status);
  }
}

#else

bool builtWithCuda() { return false; }
void bindWorkerThread(int) {}
std::shared_ptr<void> markReady(const at::Tensor&) { return nullptr; }
void waitFor(const std::shared_ptr<void>&, const at::Tensor&) {}
bool synchronizeThisThread(std::chrono::milliseconds) { return true; }
uint64_t batchesEnded() { return 0; }
bool endBatch(int, std::chrono::milliseconds) { return true; }
CommunicationScope::CommunicationScope(c10::ArrayRef<at::Tensor>, uint64_t, c10::ArrayRef<std::shared_ptr<void>>) {}
CommunicationScope::~CommunicationScope() = default;
std::shared_ptr<void> CommunicationScope::finish() { return nullptr; }
UploadScope::UploadScope(bool) {}
UploadScope::~UploadScope() = default;
std::shared_ptr<void> UploadScope::finish() { return nullptr; }
void copyToHost(const at::Tensor& t, std::function<void(at::Tensor host)> then) { then(t.to(at::kCPU).contiguous()); }
bool copyBetweenDevices(at::Tensor& dst, const at::Tensor& src) { return !src.is_cuda() && !dst.is_cuda() && copyOnCpu(dst, src); }
void enablePeerAccess(int) {}
void keepUntilDone(std::vector<at::Tensor>) {}
void releaseFinished() {}

#endif

}  // namespace dtorch::external::cuda
