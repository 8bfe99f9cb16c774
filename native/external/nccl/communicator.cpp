#include "external/nccl/communicator.h"

#include "common/error.h"

#ifdef DTORCH_WITH_NCCL
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include <map>
#include <mutex>
#endif

namespace dtorch::external::nccl {

#ifdef DTORCH_WITH_NCCL

namespace {

void check(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return;
  common::fail(common::code::kKernelFailed, std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result) +
                                                " (NCCL_DEBUG=WARN shows NCCL's own account)");
}

ncclDataType_t dataType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    // moved as bytes (gathers, all-to-all, sends); never reduced: ncclReduces says no, the caller widens
    case at::ScalarType::Float8_e4m3fn: case at::ScalarType::Float8_e5m2: return ncclUint8;
    default:
      common::fail(common::code::kInternal, std::string("NCCL does not reduce ") + c10::toString(t) + " (widen it first)");
  }
}

ncclRedOp_t redOp(Reduction op) {
  switch (op) {
    case Reduction::kSum: return ncclSum;
    case Reduction::kMax: return ncclMax;
    case Reduction::kMin: return ncclMin;
  }
  return ncclSum;
}

void checkContiguous(const at::Tensor& t, const char* what) {
  if (!t.is_cuda() || !t.is_contiguous()) common::fail(common::code::kInternal, std::string("NCCL ") + what + " needs contiguous CUDA tensors");
}

// The dtypes NCCL reduces natively.
bool ncclReduces(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kInt: case at::kLong: case at::kByte: case at::kChar: return true;
    default: return false;
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int size, int position) : comm_(comm), size_(size), position_(position) {}
  // Communicators live as long as the process: destroying them at exit races the driver's own
  // teardown, and there is one per group, created once.
  int size() const override { return size_; }
  int position() const override { return position_; }
  bool reducesNatively(at::ScalarType dtype) const override { return ncclReduces(dtype); }

  void allGather(const at::Tensor& send, at::Tensor& recv) override {
    checkContiguous(send, "all-gather");
    checkContiguous(recv, "all-gather");
    check(ncclAllGather(send.data_ptr(), recv.data_ptr(), send.nbytes(), ncclUint8, comm_, stream()), "all-gather");
  }
  void allReduce(const at::Tensor& send, at::Tensor& recv, Reduction op) override {
    checkContiguous(send, "all-reduce");
    checkContiguous(recv, "all-reduce");
    check(ncclAllReduce(send.data_ptr(), recv.data_ptr(), send.numel(), dataType(send.scalar_type()), redOp(op), comm_, stream()),
          "all-reduce");
  }
  void reduceScatter(const at::Tensor& send, at::Tensor& recv, Reduction op) override {
    checkContiguous(send, "reduce-scatter");
    checkContiguous(recv, "reduce-scatter");
    check(ncclReduceScatter(send.data_ptr(), recv.data_ptr(), recv.numel(), dataType(send.scalar_type()), redOp(op), comm_, stream()),
          "reduce-scatter");
  }
  void exchange(const std::vector<at::Tensor>& sends, std::vector<at::Tensor>& recvs) override {
    const cudaStream_t s = stream();
    check(ncclGroupStart(), "group start");
    for (int p = 0; p < size_; ++p) {
      if (sends[p].defined() && sends[p].numel() > 0) {
        checkContiguous(sends[p], "send");
        check(ncclSend(sends[p].data_ptr(), sends[p].nbytes(), ncclUint8, p, comm_, s), "send");
      }
      if (recvs[p].defined() && recvs[p].numel() > 0) {
        checkContiguous(recvs[p], "recv");
        check(ncclRecv(recvs[p].data_ptr(), recvs[p].nbytes(), ncclUint8, p, comm_, s), "recv");
      }
    }
    check(ncclGroupEnd(), "group end");
  }

 private:
  static cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }
  ncclComm_t comm_;
  int size_;
  int position_;
};

}  // namespace

bool available() { return true; }

std::string version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // codes since 2.9: major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::shared_ptr<Communicator> communicatorFor(const std::vector<int>& devices, int position) {
  static std::mutex mutex;
  static std::map<std::vector<int>, std::vector<std::shared_ptr<Communicator>>> groups;
  std::lock_guard<std::mutex> lock(mutex);
  auto& group = groups[devices];
  if (group.empty()) {
    std::vector<ncclComm_t> comms(devices.size());
    {
      c10::cuda::OptionalCUDAGuard keep;  // ncclCommInitAll switches devices; give the caller's back
      keep.set_index(c10::cuda::current_device());
      check(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()), "communicator setup");
    }
    for (size_t i = 0; i < comms.size(); ++i) {
      group.push_back(std::make_shared<NcclCommunicator>(comms[i], static_cast<int>(devices.size()), static_cast<int>(i)));
    }
  }
  return group.at(static_cast<size_t>(position));
}

#else

bool available() { return false; }
std::string version() { return ""; }
std::shared_ptr<Communicator> communicatorFor(const std::vector<int>&, int) {
  common::fail(common::code::kInternal, "this build has no NCCL");
}

#endif

}  // namespace dtorch::external::nccl
