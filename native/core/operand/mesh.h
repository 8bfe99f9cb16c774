// DeviceMesh: an N-D arrangement of devices of one kind. The engine keeps every mesh the
// client created in a table and refers to it by id; ranks are positions in row-major order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtorch::core {

enum class DeviceKind : int8_t { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  std::string name() const { return (kind == DeviceKind::kCpu ? "cpu:" : "cuda:") + std::to_string(index); }
};

struct DeviceMesh {
  int id = 0;
  DeviceKind kind = DeviceKind::kCpu;
  std::vector<int> devices;     // device index per rank, row-major over shape
  std::vector<int64_t> shape;   // size per mesh dim
  int size() const { return static_cast<int>(devices.size()); }
  int ndim() const { return static_cast<int>(shape.size()); }
  Device device(int rank) const { return {kind, devices[rank]}; }
};

}  // namespace dtorch::core
