// Kernel: one rank's share of one node, as the controller queues it on a worker.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/graph/segment_signature.h"
#include "core/operand/mesh.h"
#include "core/program/segment.h"

namespace dtorch::core {

class BlobTable;
struct Blob;

struct Kernel {
  enum class Kind : uint8_t { kRun, kFree, kFetch, kSync, kSend };
  Kind kind = Kind::kRun;
  int rank = 0;
  const Node* node = nullptr;          // kRun, kFetch, kSync, kSend
  const DeviceMesh* mesh = nullptr;    // kRun, kFetch
  int64_t id = 0;                      // kFree: the tensor to drop
  bool mayReuseInput = false;          // kRun: input 0 dies here; its buffer may take the output
  bool markMade = false;               // kRun: a communicating op of the segment reads an output
};

// Kernels for one worker from one segment; holding the segment keeps the nodes alive.
struct KernelBatch {
  std::shared_ptr<const Segment> segment;
  std::vector<Kernel> kernels;
  uint64_t number = 0;  // set by the worker that queues it: 1, 2, ...
  // The segment's signature when the controller signed it (nodes == 0: it did not): a CUDA
  // worker replays the spans it recognises by it (graph_replays.h).
  SegmentSignature signature;
};

// Runs one kernel against a worker's blobs. Never throws: a failing op poisons its outputs,
// and a failing read delivers the error to its completion.
void executeKernel(const Kernel& kernel, BlobTable& blobs, const Device& device);
// Skips a kernel that will not run (its work was dropped): the peers a collective or a send of it
// would meet are released with `why`, so that none waits for it.
void cancelKernel(const Kernel& kernel, const std::shared_ptr<const KernelError>& why);
// The blob of `id` (null if absent), ready for this worker's current stream: a tensor still being
// written on the communication stream is waited for once (later readers are ordered after it).
const Blob* settledBlob(BlobTable& blobs, int64_t id);
// What an exception a kernel threw says, without LibTorch's backtrace.
std::string errorText(const std::exception& e);

}  // namespace dtorch::core
