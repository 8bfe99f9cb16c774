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

struct Interval {
  int64_t start;
  int64_t end;
  const std::string* name;
};

constexpr int64_t kShortGapNs = 20000;
constexpr int64_t kLongGapNs = 200000;

// One device's intervals summed up: the length of their union, and the gaps between them.
void sumUp(std::vector<Interval>& intervals, int gaps, DeviceBusy& busy) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  busy.events = static_cast<int64_t>(intervals.size());
  busy.firstStartNs = intervals.front().start;
  int64_t end = intervals.front().start;
  const std::string* ender = intervals.front().name;
  std::vector<IdleGap> all;
  for (const Interval& i : intervals) {
    if (i.start > end) {
      const int64_t gap = i.start - end;
      (gap < kShortGapNs ? busy.idleShortNs : gap < kLongGapNs ? busy.idleMediumNs : busy.idleLongNs) += gap;
      all.push_back({gap, end - busy.firstStartNs, *ender, *i.name});
    }
    if (i.end > end) {
      busy.busyNs += i.end - std::max(i.start, end);
      end = i.end;
      ender = i.name;
    }
  }
  busy.lastEndNs = end;
  const size_t keep = std::min(all.size(), static_cast<size_t>(std::max(gaps, 0)));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), [](const IdleGap& a, const IdleGap& b) { return a.ns > b.ns; });
  all.resize(keep);
  busy.longestGaps = std::move(all);
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

KernelTraceResult stopKernelTrace(int top, int gaps) {
  std::lock_guard<std::mutex> lock(traceMutex);
  if (!tracing) common::fail(common::code::kInvalidArgument, "no kernel trace is running; start one first");
  tracing = false;
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::map<int, std::vector<Interval>> byDevice;
  std::map<std::string, KernelTime> byName;  // node-based: the intervals point at its keys
  for (const profiler::KinetoEvent& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;  // host-side records (runtime calls, ops)
    const auto start = static_cast<int64_t>(e.startNs());
    const auto end = static_cast<int64_t>(e.endNs());
    if (end <= start) continue;
    auto [it, _] = byName.try_emplace(e.name());
    KernelTime& k = it->second;
    k.calls++;
    k.totalNs += end - start;
    byDevice[e.deviceIndex()].push_back({start, end, &it->first});
  }
  KernelTraceResult out;
  for (auto& [device, intervals] : byDevice) {
    DeviceBusy busy;
    busy.device = device;
    sumUp(intervals, gaps, busy);
    out.devices.push_back(std::move(busy));
  }
  for (auto& [name, k] : byName) {
    k.name = name;
    out.top.push_back(std::move(k));
  }
  std::sort(out.top.begin(), out.top.end(), [](const KernelTime& a, const KernelTime& b) { return a.totalNs > b.totalNs; });
  if (static_cast<int>(out.top.size()) > top) out.top.resize(std::max(top, 0));
  return out;
}

}  // namespace dtorch::external::torch
