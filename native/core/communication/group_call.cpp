#include "core/communication/group_call.h"

#include <ATen/ATen.h>

#include "common/env.h"
#include "core/communication/communicator_call.h"
#include "core/communication/pull_call.h"
#include "core/membership/membership.h"
#include "core/operand/layout.h"
#include "external/cuda/device_sync.h"
#include "external/nccl/communicator.h"
#include "external/torch/host_staged_communicator.h"
#include "external/torch/process_group.h"

namespace dtorch::core {

at::Tensor reduceInOrder(const std::vector<at::Tensor>& parts, ReduceOp op) {
  const bool isBool = parts[0].scalar_type() == at::kBool;  // a sum or an average is "any", the min "all"
  // the first two parts combine into a new tensor (no copy of the first), the rest in place
  auto combine = [&](const at::Tensor& a, const at::Tensor& b) {
    if (isBool) return op == ReduceOp::kMin ? at::logical_and(a, b) : at::logical_or(a, b);
    if (op == ReduceOp::kMax) return at::maximum(a, b);
    if (op == ReduceOp::kMin) return at::minimum(a, b);
    return at::add(a, b);
  };
  at::Tensor acc = parts.size() == 1 ? parts[0].clone(at::MemoryFormat::Contiguous) : combine(parts[0], parts[1]).contiguous();
  for (size_t i = 2; i < parts.size(); ++i) {
    if (isBool) {
      if (op == ReduceOp::kMin) acc.logical_and_(parts[i]);
      else acc.logical_or_(parts[i]);
      continue;
    }
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc.add_(parts[i]); break;
      case ReduceOp::kMax: at::maximum_out(acc, acc, parts[i]); break;
      case ReduceOp::kMin: at::minimum_out(acc, acc, parts[i]); break;
    }
  }
  if (op == ReduceOp::kAvg && !isBool) {
    const auto n = static_cast<int64_t>(parts.size());
    if (c10::isIntegralType(acc.scalar_type(), /*includeBool=*/true)) acc.div_(n, "floor");
    else acc.div_(n);
  }
  return acc;
}

std::vector<std::shared_ptr<Rendezvous>> rendezvousPerGroup(const DeviceMesh& mesh, int meshDim) {
  const int groupSize = static_cast<int>(mesh.shape[meshDim]);
  std::vector<std::shared_ptr<Rendezvous>> groups;
  for (int g = 0; g < mesh.size() / groupSize; ++g) groups.push_back(std::make_shared<Rendezvous>(groupSize));
  return groups;
}

void GroupCall::allGatherEach(const at::Tensor& local, int64_t dim, int64_t gatheredSize, const PieceFn& use) {
  const at::Tensor all = allGather(local, dim, gatheredSize);
  const int n = groupSize();
  for (int i = 0; i < n; ++i) {
    const int p = (groupPosition() + i) % n;
    use(p, all.narrow(dim, chunkOffset(gatheredSize, n, p), chunkSize(gatheredSize, n, p)));
  }
}

at::Tensor GroupCall::reduceScatterFilled(at::IntArrayRef shape, const at::TensorOptions& options, int64_t dim, const PieceFn& fill) {
  const at::Tensor partial = at::empty(shape, options);
  const int n = groupSize();
  for (int p = 0; p < n; ++p) fill(p, partial.narrow(dim, chunkOffset(shape[dim], n, p), chunkSize(shape[dim], n, p)));
  return reduceScatter(partial, ReduceOp::kSum, dim);
}

std::unique_ptr<GroupCall> openGroupCall(const DeviceMesh& mesh, int rank, int meshDim, Rendezvous& meet) {
  int position = 0;
  const std::vector<int> ranks = groupAlong(mesh, rank, meshDim, &position);
  const ClusterMembership& cluster = ClusterMembership::instance();
  bool inProcess = true;
  for (int r : ranks) inProcess = inProcess && cluster.isLocal(mesh.device(r));
  if (!inProcess) {
    // A group over several nodes of a cluster: c10d's Gloo, meeting in the cluster's store; GPU
    // tensors go through the host (NCCL between processes is not built yet).
    const bool cuda = mesh.kind == DeviceKind::kCuda;
    std::string key = cuda ? "group/cuda" : "group/cpu";
    for (int r : ranks) key += (r == ranks.front() ? ":" : ",") + std::to_string(mesh.devices[r]);
    auto open = [key, position, cuda, size = static_cast<int>(ranks.size()), store = cluster.store(), host = cluster.host()] {
      if (!store) common::fail(common::code::kInternal, "group " + key + ": this node has no rendezvous store");
      auto gloo = external::torch::glooCommunicator(store, key, position, size, collectiveTimeout(), host);
      return cuda ? external::torch::hostStaged(std::move(gloo)) : gloo;
    };
    return std::make_unique<CommunicatorCall>(nullptr, position, static_cast<int>(ranks.size()), std::move(open), collectiveTimeout());
  }
  if (mesh.kind != DeviceKind::kCuda) return std::make_unique<PullCall>(meet, position, nullptr, collectiveTimeout());
  std::vector<int> devices;
  for (int r : ranks) devices.push_back(cluster.localDevice(mesh.device(r)).index);  // this host's GPU (cluster indices differ on a worker)
  for (int d : devices) external::cuda::enablePeerAccess(d);
  static const bool ncclOn = external::nccl::available() && common::settings().nccl;
  const bool copyEngines = common::settings().copyEngines;
  const bool copyEngineReductions = common::settings().copyEngineReductions;
  if (!ncclOn || copyEngineReductions) return std::make_unique<PullCall>(meet, position, nullptr, collectiveTimeout());
  const int size = static_cast<int>(devices.size());
  auto open = [devices = std::move(devices), position] { return external::nccl::communicatorFor(devices, position); };
  auto nccl = std::make_unique<CommunicatorCall>(&meet, position, size, std::move(open), collectiveTimeout());
  if (!copyEngines) return nccl;
  return std::make_unique<PullCall>(meet, position, std::move(nccl), collectiveTimeout());
}

}  // namespace dtorch::core
