// GroupCall: one participant's side of a collective over a group of ranks (the ranks along one
// mesh dim). Kernels only talk to this interface: PullCall (pull_call.h) copies from the peers'
// buffers (CPU shared memory, GPU copy engines); CommunicatorCall (communicator_call.h) runs the
// same calls through NCCL or Gloo. openGroupCall picks. Uneven pieces follow torch.chunk sizes
// along the dims named.
#pragma once
#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>

#include "core/communication/rendezvous.h"
#include "core/operand/mesh.h"
#include "core/operand/placement.h"

namespace dtorch::core {

class GroupCall {
 public:
  GroupCall(int position, int size) : position_(position), size_(size) {}
  virtual ~GroupCall() = default;
  // This participant's place in the group, and the group's size.
  int groupPosition() const { return position_; }
  int groupSize() const { return size_; }
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

  // Work on one participant's piece: use(p, piece) or fill(p, rows).
  using PieceFn = std::function<void(int participant, const at::Tensor& piece)>;
  // allGather, handing each participant's piece to `use` as soon as it is here: this
  // participant's own first, then the others in group order after it. `use` queues its work on
  // the caller's stream; pull-based calls move the later pieces meanwhile (the copy engines beside
  // the compute kernels). Default: one allGather, then every piece.
  virtual void allGatherEach(const at::Tensor& local, int64_t dim, int64_t gatheredSize, const PieceFn& use);
  // reduceScatter (sum) of a tensor of `shape` that `fill(p, rows)` writes in chunks along `dim`,
  // each the rows of participant p's chunk: the peers' chunks first, so that they are pulled
  // while this participant computes its own. Default: fill every chunk, then reduceScatter.
  virtual at::Tensor reduceScatterFilled(at::IntArrayRef shape, const at::TensorOptions& options, int64_t dim, const PieceFn& fill);

 protected:
  int size() const { return size_; }
  const int position_;

 private:
  const int size_;
};

// One rendezvous for each group of ranks along `meshDim`, indexed by groupIndexAlong.
std::vector<std::shared_ptr<Rendezvous>> rendezvousPerGroup(const DeviceMesh& mesh, int meshDim);

// Reduces `parts` in order into a new tensor.
at::Tensor reduceInOrder(const std::vector<at::Tensor>& parts, ReduceOp op);

// The call for `rank`'s group along `meshDim`, meeting at `meet`. GPUs: pulls by the copy
// engines for data movement and NCCL for reductions and ring passes (DTORCH_COPY_ENGINES=0: all
// through NCCL; DTORCH_COPY_ENGINE_REDUCTIONS=1 or no NCCL: all by pulls). CPU: pulls.
std::unique_ptr<GroupCall> openGroupCall(const DeviceMesh& mesh, int rank, int meshDim, Rendezvous& meet);

}  // namespace dtorch::core
