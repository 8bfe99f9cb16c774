// A trace of the GPU work the process ran between start and stop, through LibTorch's profiler
// (Kineto over CUPTI, the timeline torch.profiler records): each device's kernels, copies and
// fills, and the time the device was busy with any of them (the union of their intervals).
// For benchmarks: how much of a forward's wall time a GPU sits idle between kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtorch::external::torch {

// A stretch in which a device ran nothing, between the work that ended it and the work after it.
struct IdleGap {
  int64_t ns = 0;
  int64_t atNs = 0;    // where it starts, from the start of the device's first work
  std::string before;  // the kernel (copy, fill) whose end started the gap
  std::string after;   // the one whose start ended it
};

struct DeviceBusy {
  int device = 0;
  int64_t events = 0;       // kernels, copies and fills that ran on the device
  int64_t busyNs = 0;       // union of their [start, end) intervals
  int64_t firstStartNs = 0; // trace clock, for the span of the work
  int64_t lastEndNs = 0;
  // Idle time inside the span, by the length of the gap it lies in: where it comes from (short
  // gaps: kernels issued slower than they run; long ones: the device waited for the program).
  int64_t idleShortNs = 0;   // gaps under 20 us
  int64_t idleMediumNs = 0;  // 20 us to 200 us
  int64_t idleLongNs = 0;    // 200 us and more
  std::vector<IdleGap> longestGaps;  // longest first
};

struct KernelTime {
  std::string name;
  int64_t calls = 0;
  int64_t totalNs = 0;
};

struct KernelTraceResult {
  std::vector<DeviceBusy> devices;
  std::vector<KernelTime> top;  // the kernels that took longest, all devices together, longest first
};

// Starts tracing GPU activity; throws kInvalidArgument without CUDA devices or when a trace runs.
void startKernelTrace();
// Stops the trace started by startKernelTrace and sums it up (`top` kernels by total time, the
// `gaps` longest idle gaps of each device).
KernelTraceResult stopKernelTrace(int top, int gaps = 8);

}  // namespace dtorch::external::torch
