// GroupCall: one participant's side of a collective over a group of ranks (the ranks along one
// mesh dim). Kernels only talk to this interface: the CPU implementation below meets the other
// workers in shared memory; NcclCall (nccl_call.h) runs the same calls through NCCL on the
// calling thread's current stream. openGroupCall picks one. Uneven pieces follow torch.chunk
// sizes along the dims named.
#pragma once
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>

#include "core/communication/rendezvous.h"
#include "core/operand/mesh.h"
#include "core/operand/placement.h"

namespace dtorch::core {

class GroupCall {
 public:
  virtual ~GroupCall() = default;
  // Every participant's piece, concatenated along `dim` in group order (S -> R); the pieces are
  // torch.chunk's of `gatheredSize`.
  virtual at::Tensor allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) = 0;
  // The reduction of every participant's tensor (P -> R).
  virtual at::Tensor allReduce(const at::Tensor& local, ReduceOp op) = 0;
  // This participant's chunk along `dim` of the reduction (P -> S).
  virtual at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) = 0;
  // Chunk `local` along `splitDim`, send chunk p to participant p, concatenate what arrives
  // along `concatDim` (S(concatDim) -> S(splitDim)); the arriving pieces are torch.chunk's of
  // `concatSize`.
  virtual at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) = 0;
  // Sends `local` to the next participant (wrapping around) and returns what the previous one
  // sent, flat: `incomingNumel` elements of local's dtype (a ring pass).
  virtual at::Tensor shift(const at::Tensor& local, int64_t incomingNumel) = 0;
};

// The in-process CPU implementation over a Rendezvous. Every participant reduces in group
// order, so all of them get bit-identical results.
class SharedMemoryCall final : public GroupCall {
 public:
  SharedMemoryCall(Rendezvous& rendezvous, int position, c10::Device device, std::chrono::milliseconds timeout)
      : rendezvous_(rendezvous), position_(position), device_(device), timeout_(timeout) {}
  at::Tensor allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) override;
  at::Tensor allReduce(const at::Tensor& local, ReduceOp op) override;
  at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) override;
  at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) override;
  at::Tensor shift(const at::Tensor& local, int64_t incomingNumel) override;

 private:
  // Deposits `local`, combines everyone's tensors, leaves.
  template <typename Combine>
  at::Tensor meet(const at::Tensor& local, Combine&& combine);

  Rendezvous& rendezvous_;
  int position_;
  c10::Device device_;  // where this participant computes
  std::chrono::milliseconds timeout_;
};

// Reduces `parts` in order into a new tensor.
at::Tensor reduceInOrder(const std::vector<at::Tensor>& parts, ReduceOp op);

// The call for `rank`'s group along `meshDim`: NCCL when the group is on distinct GPUs and the
// build has NCCL (DTORCH_NCCL=0 turns it off), shared memory otherwise. `meet` is the group's
// rendezvous; `device` where this rank computes.
std::unique_ptr<GroupCall> openGroupCall(const DeviceMesh& mesh, int rank, int meshDim, Rendezvous& meet, c10::Device device);

}  // namespace dtorch::core
