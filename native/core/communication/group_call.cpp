#include "core/communication/group_call.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/env.h"
#include "core/communication/nccl_call.h"
#include "core/communication/peer_copy_call.h"
#include "external/cuda/device_sync.h"
#include "core/operand/layout.h"
#include "external/nccl/communicator.h"

namespace dtorch::core {

at::Tensor reduceInOrder(const std::vector<at::Tensor>& parts, ReduceOp op) {
  at::Tensor acc = parts[0].clone(at::MemoryFormat::Contiguous);
  if (acc.scalar_type() == at::kBool) {  // bools: a sum or an average is "any", the min "all"
    for (size_t i = 1; i < parts.size(); ++i) {
      if (op == ReduceOp::kMin) acc.logical_and_(parts[i]);
      else acc.logical_or_(parts[i]);
    }
    return acc;
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc.add_(parts[i]); break;
      case ReduceOp::kMax: at::maximum_out(acc, acc, parts[i]); break;
      case ReduceOp::kMin: at::minimum_out(acc, acc, parts[i]); break;
    }
  }
  if (op == ReduceOp::kAvg) {
    const auto n = static_cast<int64_t>(parts.size());
    if (c10::isIntegralType(acc.scalar_type(), /*includeBool=*/true)) acc.div_(n, "floor");
    else acc.div_(n);
  }
  return acc;
}

namespace {
at::Tensor chunkOf(const at::Tensor& t, int64_t dim, int64_t parts, int64_t index) {
  const int64_t size = t.size(dim);
  return t.narrow(dim, chunkOffset(size, parts, index), chunkSize(size, parts, index));
}
}  // namespace

template <typename Combine>
at::Tensor SharedMemoryCall::meet(const at::Tensor& local, Combine&& combine) {
  const auto& contributions = rendezvous_.exchange(position_, local, timeout_);
  std::vector<at::Tensor> all;  // on this participant's device, after their producers
  for (const Contribution& c : contributions) all.push_back(c.readable(device_));
  at::Tensor out = combine(all);
  finishReads(contributions);
  rendezvous_.depart();
  return out;
}

at::Tensor SharedMemoryCall::allGather(const at::Tensor& local, int64_t dim, int64_t) {
  return meet(local, [&](const std::vector<at::Tensor>& all) { return at::cat(all, dim); });
}

at::Tensor SharedMemoryCall::allReduce(const at::Tensor& local, ReduceOp op) {
  return meet(local, [&](const std::vector<at::Tensor>& all) { return reduceInOrder(all, op); });
}

at::Tensor SharedMemoryCall::reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) {
  return meet(local, [&](const std::vector<at::Tensor>& all) {
    std::vector<at::Tensor> mine;
    for (const at::Tensor& t : all) mine.push_back(chunkOf(t, dim, rendezvous_.size(), position_));
    return reduceInOrder(mine, op);
  });
}

at::Tensor SharedMemoryCall::allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t) {
  return meet(local, [&](const std::vector<at::Tensor>& all) {
    std::vector<at::Tensor> pieces;
    for (const at::Tensor& t : all) pieces.push_back(chunkOf(t, splitDim, rendezvous_.size(), position_));
    return at::cat(pieces, concatDim);
  });
}

at::Tensor SharedMemoryCall::shift(const at::Tensor& local, int64_t) {
  const auto& all = rendezvous_.exchange(position_, local, timeout_);
  const Contribution& previous = all[(position_ - 1 + rendezvous_.size()) % rendezvous_.size()];
  at::Tensor received = previous.readable(device_).clone();  // ours: the sender may reuse its buffer
  finishReads(previous);
  rendezvous_.depart();
  return received;
}

std::unique_ptr<GroupCall> openGroupCall(const DeviceMesh& mesh, int rank, int meshDim, Rendezvous& meet, c10::Device device) {
  int position = 0;
  const std::vector<int> ranks = groupAlong(mesh, rank, meshDim, &position);
  static const bool ncclOn = external::nccl::available() && common::envInt("DTORCH_NCCL", 1) != 0;
  if (mesh.kind == DeviceKind::kCuda && ncclOn) {
    std::vector<int> devices;
    for (int r : ranks) devices.push_back(mesh.devices[r]);
    std::vector<int> sorted = devices;
    std::sort(sorted.begin(), sorted.end());
    // one NCCL rank per GPU: a group that uses a GPU twice meets in shared memory instead
    if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) {
      auto nccl = std::make_unique<NcclCall>(meet, position, devices, collectiveTimeout());
      // data movement by the copy engines (DTORCH_COPY_ENGINES=0: all through NCCL)
      static const bool copyEngines = common::envInt("DTORCH_COPY_ENGINES", 1) != 0;
      if (!copyEngines) return nccl;
      for (int d : devices) external::cuda::enablePeerAccess(d);
      return std::make_unique<PeerCopyCall>(meet, position, std::move(devices), std::move(nccl), collectiveTimeout());
    }
  }
  return std::make_unique<SharedMemoryCall>(meet, position, device, collectiveTimeout());
}

}  // namespace dtorch::core
