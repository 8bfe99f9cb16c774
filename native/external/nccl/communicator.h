// NCCL for in-process groups of GPUs: one communicator per participant of a group of CUDA
// devices (the ranks along one mesh dim, in group order), created together the first time the
// group communicates (ncclCommInitAll) and cached for the life of the process. Calls queue on
// the calling thread's current stream and return at once. Linked against the NCCL that LibTorch
// itself loads, so that the process holds one NCCL. Without NCCL in the build, available() is
// false and the engine moves data between GPUs with peer copies instead.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace dtorch::external::nccl {

bool available();
// e.g. "2.28.3"; empty without NCCL
std::string version();

enum class Reduction { kSum, kMax, kMin };

// One participant's side of a group. Every participant must make the same calls in the same
// order (the engine's workers do: they run collectives in the order the controller queued them).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  virtual int position() const = 0;
  // recv = every participant's `send` (same byte size), concatenated in group order.
  virtual void allGather(const at::Tensor& send, at::Tensor& recv) = 0;
  // recv = the elementwise reduction of every participant's `send` (same shape and dtype).
  virtual void allReduce(const at::Tensor& send, at::Tensor& recv, Reduction op) = 0;
  // recv = this participant's block (send.numel() / size elements) of the reduction.
  virtual void reduceScatter(const at::Tensor& send, at::Tensor& recv, Reduction op) = 0;
  // Point to point in one group call: sends[p] goes to participant p, recvs[p] comes from it
  // (undefined tensors: nothing to or from that participant).
  virtual void exchange(const std::vector<at::Tensor>& sends, std::vector<at::Tensor>& recvs) = 0;
};

// The communicator of `position` in the group of CUDA `devices` (distinct device indices).
// Thread-safe; the first caller creates the whole group's communicators.
std::shared_ptr<Communicator> communicatorFor(const std::vector<int>& devices, int position);

// The dtypes NCCL reduces natively (other dtypes are widened by the caller).
bool reducesNatively(at::ScalarType dtype);

}  // namespace dtorch::external::nccl
