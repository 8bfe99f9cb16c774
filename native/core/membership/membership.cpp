#include "core/membership/membership.h"

#include "common/error.h"

namespace dtorch::core {

ClusterMembership& ClusterMembership::instance() {
  static ClusterMembership membership;
  return membership;
}

void ClusterMembership::join(int thisNode, uint64_t epoch, std::shared_ptr<external::torch::RendezvousStore> store, std::string host) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = true;
  host_ = std::move(host);
  thisNode_ = thisNode;
  epoch_ = epoch;
  store_ = std::move(store);
  devices_.clear();
  lost_.clear();
}

void ClusterMembership::addDevices(const std::vector<ClusterDevice>& devices) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const ClusterDevice& d : devices) {
    auto found = devices_.find(keyOf(d.device));
    if (found != devices_.end() && (found->second.node != d.node || found->second.localIndex != d.localIndex)) {
      common::fail(common::code::kInvalidArgument, "cluster device " + d.device.name() + " is held by node " +
                                                       std::to_string(found->second.node) + " already");
    }
  }
  for (const ClusterDevice& d : devices) devices_[keyOf(d.device)] = d;
}

void ClusterMembership::markLost(int node) {
  std::lock_guard<std::mutex> lock(mutex_);
  lost_.insert(node);
}

void ClusterMembership::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = false;
  thisNode_ = 0;
  store_.reset();
  devices_.clear();
  lost_.clear();
}

bool ClusterMembership::active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return active_;
}

int ClusterMembership::thisNode() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return thisNode_;
}

uint64_t ClusterMembership::epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return epoch_;
}

int ClusterMembership::nodeOf(const Device& device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return thisNode_;
  auto found = devices_.find(keyOf(device));
  return found == devices_.end() ? -1 : found->second.node;
}

bool ClusterMembership::isLost(int node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_.count(node) > 0;
}

bool ClusterMembership::holdsAll(const DeviceMesh& mesh) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return true;
  for (int rank = 0; rank < mesh.size(); ++rank) {
    auto found = devices_.find(keyOf(mesh.device(rank)));
    if (found == devices_.end() || found->second.node != thisNode_) return false;
  }
  return true;
}

std::vector<int> ClusterMembership::otherNodes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<int> nodes;
  for (const auto& [key, d] : devices_) {
    if (d.node != thisNode_) nodes.insert(d.node);
  }
  return {nodes.begin(), nodes.end()};
}

Device ClusterMembership::localDevice(const Device& device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return device;
  auto found = devices_.find(keyOf(device));
  return found == devices_.end() ? device : Device{device.kind, found->second.localIndex};
}

std::shared_ptr<external::torch::RendezvousStore> ClusterMembership::store() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_;
}

std::string ClusterMembership::host() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return host_;
}

std::vector<ClusterDevice> ClusterMembership::devices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ClusterDevice> out;
  for (const auto& [key, d] : devices_) out.push_back(d);
  return out;
}

std::string ClusterMembership::describe(const Device& device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return device.name();
  auto found = devices_.find(keyOf(device));
  if (found == devices_.end()) return device.name() + " (in no node of the cluster)";
  const ClusterDevice& d = found->second;
  return device.name() + " (node " + std::to_string(d.node) + "'s " + Device{device.kind, d.localIndex}.name() + ")";
}

}  // namespace dtorch::core
