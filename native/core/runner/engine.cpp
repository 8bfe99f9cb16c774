#include "core/runner/engine.h"

#include <set>

#include "common/env.h"
#include "common/error.h"
#include "common/format.h"
#include "external/torch/torch_info.h"

namespace dtorch::core {

Engine::Engine() : controller_(meshes_, workers_), recorder_(meshes_, controller_) {}

Engine::~Engine() { shutdown(); }

const DeviceMesh& Engine::createMesh(DeviceKind kind, std::vector<int> devices, std::vector<int64_t> shape) {
  using common::code::kInvalidMesh;
  const common::Settings& settings = common::settings();  // a malformed setting is refused here, on the JS thread
  if (devices.empty()) common::fail(kInvalidMesh, "a device mesh needs at least one device");
  int64_t product = 1;
  for (int64_t s : shape) product *= s;
  if (product != static_cast<int64_t>(devices.size())) {
    common::fail(kInvalidMesh, "mesh shape " + common::formatList(shape) + " holds " + std::to_string(product) +
                                   " devices but " + std::to_string(devices.size()) + " were given");
  }
  std::set<int> seen;
  for (int d : devices) {
    if (d < 0) common::fail(kInvalidMesh, "device index " + std::to_string(d) + " is negative");
    if (!seen.insert(d).second) {
      common::fail(kInvalidMesh, "device " + std::to_string(d) + " appears more than once in " + common::formatList(devices) +
                                     "; each device may hold one rank of a mesh");
    }
  }
  if (kind == DeviceKind::kCpu) {
    // CPU devices are worker threads; cap them so a typo cannot start thousands of threads
    const int64_t available = settings.cpuDevices;
    for (int d : devices) {
      if (d >= available) {
        common::fail(kInvalidMesh, "cpu device " + std::to_string(d) + " does not exist: this process has cpu devices 0.." +
                                       std::to_string(available - 1) + " (set DTORCH_CPU_DEVICES for more)");
      }
    }
  }
  if (kind == DeviceKind::kCuda) {
    const int available = external::torch::cudaDeviceCount();
    for (int d : devices) {
      if (d >= available) {
        common::fail(kInvalidMesh, "cuda device " + std::to_string(d) + " does not exist: this process sees " +
                                       std::to_string(available) + " CUDA device(s)" +
                                       (available == 0 ? " (LibTorch was built without CUDA or no GPU is present); use 'cpu'" : ""));
      }
    }
  }
  if (const DeviceMesh* existing = meshes_.find(kind, devices, shape)) return *existing;  // one id per layout
  DeviceMesh mesh;
  mesh.kind = kind;
  mesh.devices = std::move(devices);
  mesh.shape = std::move(shape);
  const DeviceMesh& added = meshes_.add(std::move(mesh));
  workers_.registerMesh(added);
  return added;
}

void Engine::fetch(int64_t id, std::shared_ptr<Completion> completion) {
  const TensorMeta& m = recorder_.meta(id);
  if (allReplicate(m.placements) || !partialsAdd(m.placements)) {
    recorder_.fetch(id, std::move(completion));
    return;
  }
  const DeviceMesh& mesh = meshes_.get(m.meshId);
  const int target = createMesh(mesh.kind, {mesh.devices[0]}, {1}).id;  // the 1-device mesh of rank 0
  recorder_.fetchGathered(id, target, std::move(completion));
}

std::vector<WorkerInfo> Engine::workers() const {
  std::vector<WorkerInfo> out;
  for (Worker* w : workers_.all()) {
    out.push_back({w->device(), w->allocatedBytes(), w->intraOpThreadsInUse(), w->peakBytes(), w->kernelsRun()});
  }
  return out;
}

void Engine::resetPeakMemory() {
  for (Worker* w : workers_.all()) w->resetPeak();
}

void Engine::shutdown() {
  if (shutDown_) return;
  shutDown_ = true;
  recorder_.flush();
  controller_.stop();
  workers_.stopAll();
}

}  // namespace dtorch::core
