#include "core/communication/communicator_call.h"

#include <ATen/ATen.h>

#include "core/operand/layout.h"

namespace dtorch::core {

namespace {

using external::Reduction;

// What each participant is about to launch, checked at the meeting (Rendezvous algorithms).
enum Call : int { kCommAllGather = 1, kCommAllReduce, kCommReduceScatter, kCommAllToAll, kCommShift };

// How a ReduceOp runs on a communicator for one dtype: the dtype it reduces (bools as bytes,
// others it lacks, such as int16, as int32), its op (a bool sum is "any": a max of bytes), and
// what is left to do afterwards (an average divides the sum, as reduceInOrder does, so both
// paths agree).
struct ReducePlan {
  at::ScalarType wire;
  Reduction op;
  bool average;
};

ReducePlan planReduce(const external::Communicator& comm, at::ScalarType dtype, ReduceOp op) {
  if (dtype == at::kBool) return {at::kByte, op == ReduceOp::kMin ? Reduction::kMin : Reduction::kMax, false};
  const at::ScalarType wire = comm.reducesNatively(dtype) ? dtype : at::kInt;
  switch (op) {
    case ReduceOp::kSum: return {wire, Reduction::kSum, false};
    case ReduceOp::kAvg: return {wire, Reduction::kSum, true};
    case ReduceOp::kMax: return {wire, Reduction::kMax, false};
    case ReduceOp::kMin: return {wire, Reduction::kMin, false};
  }
  return {wire, Reduction::kSum, false};
}

// Back from the wire: the average's division, then the caller's dtype.
at::Tensor finishReduce(at::Tensor t, const ReducePlan& plan, int parts, at::ScalarType dtype) {
  if (plan.average) {
    if (c10::isIntegralType(t.scalar_type(), /*includeBool=*/false)) t.div_(parts, "floor");
    else t.div_(parts);
  }
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

}  // namespace

void CommunicatorCall::meetPeers(int call) {
  if (rendezvous_ == nullptr) return;
  rendezvous_->exchange(position_, at::Tensor(), timeout_, call);  // throws if a peer failed
  rendezvous_->depart();
}

external::Communicator& CommunicatorCall::comm() {
  if (!comm_) comm_ = open_();
  return *comm_;
}

at::Tensor CommunicatorCall::allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) {
  const int n = size();
  const int64_t largest = chunkSize(gatheredSize, n, 0);  // torch.chunk: the first piece is the largest
  at::Tensor send = local.movedim(dim, 0);
  if (send.size(0) != largest) {
    at::Tensor padded = at::zeros(withSize(send.sizes(), 0, largest), send.options());
    padded.narrow(0, 0, send.size(0)).copy_(send);
    send = padded;
  } else {
    send = send.contiguous();
  }
  at::Tensor recv = at::empty(withSize(send.sizes(), 0, largest * n), send.options());
  meetPeers(kCommAllGather);
  if (recv.numel() > 0) comm().allGather(send, recv);
  if (largest * n != gatheredSize) {  // drop the padding
    std::vector<at::Tensor> pieces;
    for (int p = 0; p < n; ++p) pieces.push_back(recv.narrow(0, p * largest, chunkSize(gatheredSize, n, p)));
    recv = at::cat(pieces, 0);
  }
  return dim == 0 ? recv : recv.movedim(0, dim).contiguous();
}

at::Tensor CommunicatorCall::allReduce(const at::Tensor& local, ReduceOp op) {
  const ReducePlan plan = planReduce(comm(), local.scalar_type(), op);
  const at::Tensor send = local.to(plan.wire).contiguous();
  at::Tensor recv = at::empty_like(send);
  meetPeers(kCommAllReduce);
  if (recv.numel() > 0) comm().allReduce(send, recv, plan.op);
  return finishReduce(recv, plan, size(), local.scalar_type());
}

at::Tensor CommunicatorCall::reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) {
  const int n = size();
  const ReducePlan plan = planReduce(comm(), local.scalar_type(), op);
  const at::Tensor x = local.movedim(dim, 0).to(plan.wire);
  const int64_t full = x.size(0), largest = chunkSize(full, n, 0);
  at::Tensor send;
  if (largest * n == full) {
    send = x.contiguous();
  } else {  // each participant's block padded to the largest; the padding is reduced and dropped
    send = at::zeros(withSize(x.sizes(), 0, largest * n), x.options());
    for (int p = 0; p < n; ++p) {
      const int64_t rows = chunkSize(full, n, p);
      if (rows > 0) send.narrow(0, p * largest, rows).copy_(x.narrow(0, chunkOffset(full, n, p), rows));
    }
  }
  at::Tensor recv = at::empty(withSize(x.sizes(), 0, largest), x.options());
  meetPeers(kCommReduceScatter);
  if (recv.numel() > 0) comm().reduceScatter(send, recv, plan.op);
  at::Tensor mine = finishReduce(recv.narrow(0, 0, chunkSize(full, n, position_)), plan, n, local.scalar_type());
  return mine.movedim(0, dim).contiguous();
}

at::Tensor CommunicatorCall::allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) {
  const int n = size();
  const int64_t split = local.size(splitDim);
  std::vector<at::Tensor> sends(n), recvs(n);
  for (int p = 0; p < n; ++p) {
    if (p == position_) continue;  // our own piece stays here
    sends[p] = local.narrow(splitDim, chunkOffset(split, n, p), chunkSize(split, n, p)).contiguous();
    std::vector<int64_t> shape = withSize(local.sizes(), splitDim, chunkSize(split, n, position_));
    shape[static_cast<size_t>(concatDim)] = chunkSize(concatSize, n, p);
    recvs[p] = at::empty(shape, local.options());
  }
  meetPeers(kCommAllToAll);
  comm().exchange(sends, recvs);
  recvs[position_] = local.narrow(splitDim, chunkOffset(split, n, position_), chunkSize(split, n, position_));
  return at::cat(recvs, concatDim);
}

at::Tensor CommunicatorCall::shift(const at::Tensor& local, int64_t incomingNumel) {
  const int n = size();
  const int next = (position_ + 1) % n, previous = (position_ - 1 + n) % n;
  std::vector<at::Tensor> sends(n), recvs(n);
  sends[next] = local.contiguous();
  recvs[previous] = at::empty({incomingNumel}, local.options());
  meetPeers(kCommShift);
  comm().exchange(sends, recvs);
  return recvs[previous];
}

}  // namespace dtorch::core
