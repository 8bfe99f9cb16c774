// Communicator: one participant's side of a group that moves and reduces whole buffers, the
// interface CommunicatorCall (core/communication/communicator_call.h) runs collectives over.
// NCCL implements it for GPUs of one process (nccl/communicator.h), c10d's Gloo for CPU tensors
// of several processes (torch/process_group.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

namespace dtorch::external {

enum class Reduction { kSum, kMax, kMin };

// Every participant must make the same calls in the same order (the engine's workers do: they
// run collectives in the order the controller queued them).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  virtual int position() const = 0;
  // Whether reductions take `dtype` as it is (other dtypes are widened by the caller).
  virtual bool reducesNatively(at::ScalarType dtype) const = 0;
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

}  // namespace dtorch::external
