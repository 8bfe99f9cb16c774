// CallTrace: what one call of a compiled function (dt.graph.compile, Module.compile) recorded,
// kept so that a later call on arguments of the same shapes is recorded again by copying it
// (Recorder::replayTrace) instead of running the program's code: the host's share of a
// compiled model call becomes a copy of its nodes (DESIGN §2.3). The copy is the same stream
// of nodes a run of the code would have recorded, so the controller recognises and replays its
// segments as it would those. Each node's inputs are named by their role: an argument of the
// call, a tensor the call made (in the order it made them), or a tensor from before the call
// (a weight), read again by its id.
#pragma once
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/program/node.h"

namespace dtorch::core {

struct TraceRef {
  enum class Role : uint8_t { kArgument, kMade, kOutside };
  Role role = Role::kMade;
  int64_t index = 0;  // the argument's position, the made tensor's position, or the outside tensor's id
};

struct TracedNode {
  Node node;                             // a compute node or a release, as recorded (the traced call's ids)
  c10::SmallVector<TraceRef, 4> inputs;  // a compute node's inputs; a release's tensor
};

struct CallTrace {
  std::vector<TracedNode> nodes;
  std::vector<TensorMeta> arguments;    // each argument as it was: a replay takes only the same
  std::vector<int> argumentAlias;       // for each argument, the first position holding the same tensor
  std::vector<int64_t> outside;         // the tensors from before the call that it reads: each must still be live
  c10::SmallVector<int64_t, 4> outputs; // made positions of what the call returned, in order
  int64_t made = 0;                     // how many tensors the call made
  // Where a copy hands its first segment over (nodes [0, headEnd)), so that the devices start on
  // it while the rest is copied; 0: the copy is handed over whole (a short call). See headCut.
  size_t headEnd = 0;
};

// The trace of a call that recorded `nodes` (in order) on `arguments` (ids, with their metas)
// and returned `outputs`; null, with `why` (what the call did that a copy would not do again),
// when it cannot be replayed by copying.
std::unique_ptr<CallTrace> traceCall(const std::vector<Node>& nodes, c10::ArrayRef<int64_t> arguments,
                                     const std::vector<TensorMeta>& argumentMetas, c10::ArrayRef<int64_t> outputs, std::string& why);

// Where a copy of `trace` hands its first segment over: among the positions after a quarter to a
// half of its compute nodes, the one with the fewest bytes of the call's own tensors alive
// across it (what a graph on each side copies out and in); 0 (whole) for a call of fewer than
// `minComputeNodes` compute nodes, or when `minComputeNodes` is 0.
size_t headCut(const CallTrace& trace, int64_t minComputeNodes);

}  // namespace dtorch::core
