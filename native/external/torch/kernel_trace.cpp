#include "external/torch/kernel_trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "common/error.h"
#include "external/torch/torch_info.h"

namespace dtorch::external::torch {

namespace {

namespace profiler = ::torch::autograd::profiler;
namespace impl = ::torch::profiler::impl;

std::mutex traceMutex;
bool tracing = false;

const impl::ProfilerConfig& config() {
  static const impl::ProfilerConfig kineto(impl::ProfilerState::KINETO);
  return kineto;
}

const std::set<impl::ActivityType>& activities() {
  static const std::set<impl::ActivityType> gpu{impl::ActivityType::CUDA};
  return gpu;
}

// Total length of the union of [start, end) intervals.
int64_t unionLength(std::vector<std::pair<int64_t, int64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0, end = INT64_MIN;
  for (const auto& [s, e] : intervals) {
    if (s >= end) {
      total += e - s;
      end = e;
    } else if (e > end) {
      total += e - end;
      end = e;
    }
  }
  return total;
}

}  // namespace

void startKernelTrace() {
  std::lock_guard<std::mutex> lock(traceMutex);
  if (cudaDeviceCount() == 0) common::fail(common::code::kInvalidArgument, "kernel traces need CUDA devices, and this process sees none");
  if (tracing) common::fail(common::code::kInvalidArgument, "a kernel trace is already running; stop it first");
  profiler::prepareProfiler(config(), activities());
  profiler::enableProfiler(config(), activities());
  tracing = true;
}

KernelTraceResult stopKernelTrace(int top) {
  std::lock_guard<std::mutex> lock(traceMutex);
  if (!tracing) common::fail(common::code::kInvalidArgument, "no kernel trace is running; start one first");
  tracing = false;
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> byDevice;
  std::map<std::string, KernelTime> byName;
  for (const profiler::KinetoEvent& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;  // host-side records (runtime calls, ops)
    const auto start = static_cast<int64_t>(e.startNs());
    const auto end = static_cast<int64_t>(e.endNs());
    if (end <= start) continue;
    byDevice[e.deviceIndex()].emplace_back(start, end);
    KernelTime& k = byName[e.name()];
    k.name = e.name();
    k.calls++;
    k.totalNs += end - start;
  }
  KernelTraceResult out;
  for (auto& [device, intervals] : byDevice) {
    DeviceBusy busy;
    busy.device = device;
    busy.events = static_cast<int64_t>(intervals.size());
    busy.firstStartNs = std::min_element(intervals.begin(), intervals.end())->first;
    busy.lastEndNs = std::max_element(intervals.begin(), intervals.end(), [](auto& a, auto& b) { return a.second < b.second; })->second;
    busy.busyNs = unionLength(intervals);
    out.devices.push_back(busy);
  }
  for (auto& [name, k] : byName) out.top.push_back(std::move(k));
  std::sort(out.top.begin(), out.top.end(), [](const KernelTime& a, const KernelTime& b) { return a.totalNs > b.totalNs; });
  if (static_cast<int>(out.top.size()) > top) out.top.resize(std::max(top, 0));
  return out;
}

}  // namespace dtorch::external::torch
