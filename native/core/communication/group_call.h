// GroupCall: one participant's side of a collective over a group of ranks (the ranks along one
// mesh dim). Kernels only talk to this interface: the in-process CPU implementation below meets
// the other workers in shared memory; the NCCL one (GPU backend) implements the same calls on
// the communication stream. Uneven pieces follow torch.chunk sizes along the dims named.
#pragma once
#include <ATen/core/Tensor.h>

#include <chrono>

#include "core/communication/rendezvous.h"
#include "core/operand/placement.h"

namespace dtorch::core {

class GroupCall {
 public:
  virtual ~GroupCall() = default;
  // Every participant's piece, concatenated along `dim` in group order (S -> R).
  virtual at::Tensor allGather(const at::Tensor& local, int64_t dim) = 0;
  // The reduction of every participant's tensor (P -> R).
  virtual at::Tensor allReduce(const at::Tensor& local, ReduceOp op) = 0;
  // This participant's chunk along `dim` of the reduction (P -> S).
  virtual at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) = 0;
  // Chunk `local` along `splitDim`, send chunk p to participant p, concatenate what arrives
  // along `concatDim` (S(concatDim) -> S(splitDim)).
  virtual at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim) = 0;
};

// The in-process CPU implementation over a Rendezvous. Every participant reduces in group
// order, so all of them get bit-identical results.
class SharedMemoryCall final : public GroupCall {
 public:
  SharedMemoryCall(Rendezvous& rendezvous, int position, c10::Device device, std::chrono::milliseconds timeout)
      : rendezvous_(rendezvous), position_(position), device_(device), timeout_(timeout) {}
  at::Tensor allGather(const at::Tensor& local, int64_t dim) override;
  at::Tensor allReduce(const at::Tensor& local, ReduceOp op) override;
  at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) override;
  at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim) override;

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

}  // namespace dtorch::core
