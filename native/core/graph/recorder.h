// Recorder: the client side of the engine, used only from the JS thread. It knows every live
// tensor's meta, infers the outputs of each recorded op, appends nodes to the open segment,
// and hands the segment to the controller when it is long enough or when asked.
#pragma once
#include <algorithm>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/id_map.h"
#include "core/graph/call_trace.h"
#include "core/graph/segment_sink.h"
#include "core/operand/mesh_table.h"
#include "core/operators/op.h"
#include "core/operators/signature.h"

namespace dtorch::core {

struct Completion;

struct DeviceMemory {
  Device device;
  int64_t numTensors = 0;  // live tensors with a part on this device
  int64_t numBytes = 0;    // their local bytes on this device
};

struct MemoryStats {
  int64_t numTensors = 0;  // live tensors
  int64_t numBytes = 0;    // their logical (full) bytes
  std::vector<DeviceMemory> perDevice;
};

class Recorder {
 public:
  // `sink` takes every segment the recorder closes (the controller, in an engine).
  Recorder(const MeshTable& meshes, SegmentSink& sink);

  // Infers and appends one op; output metas are then readable through meta(id).
  struct Recorded {
    uint64_t seq;
    c10::SmallVector<int64_t, 2> outputs;
  };
  Recorded record(const OpDef& op, c10::ArrayRef<int64_t> inputs, c10::ArrayRef<double> attrs,
                     at::Tensor hostData = {});
  // Records `op` (from_data, from_local_data) on a copy of `bytes` (`byteLength` of them, elements of `source`),
  // made now: the attributes' creation header (meshId, nPlacements, placements..., dtype, ndim,
  // shape...) gives the shape and the dtype it is converted to. Bytes that do not fill the shape
  // throw SHAPE_MISMATCH.
  Recorded recordHostData(const OpDef& op, c10::ArrayRef<double> attrs, const void* bytes, size_t byteLength, DType source);
  // The placement rows `op` has for these inputs and attributes (its infer runs first, so bad
  // input throws as record would); records nothing.
  SignatureRows signatureRows(const OpDef& op, c10::ArrayRef<int64_t> inputs, c10::ArrayRef<double> attrs) const;
  // Redistributes tensor `id` to `placements` on mesh `meshId` (its own or another): one node on
  // one mesh; across meshes of one shape, each rank's piece to the rank of its index
  // (transfer_pieces), then the placements; across others, gather on the source, transfer, then
  // slice on the target.
  Recorded redistribute(int64_t id, int meshId, const Placements& placements);
  void release(int64_t id);
  // Records a read; returns the read node's sequence number (0: it failed at once, delivered).
  uint64_t fetch(int64_t id, std::shared_ptr<Completion> completion);
  // Reads tensor `id` gathered onto the 1-device mesh `targetMeshId` (of its rank 0's device).
  void fetchGathered(int64_t id, int targetMeshId, std::shared_ptr<Completion> completion);
  // Records a sync; returns its node's sequence number.
  uint64_t sync(std::shared_ptr<Completion> completion);
  // Called with each segment just before the controller gets it (the main node of a cluster
  // streams it to the workers); a throw counts as a failed hand-over.
  void setSegmentTap(std::function<void(const Segment&)> tap) { tap_ = std::move(tap); }
  // Hands the open segment to the controller. Never throws: a segment that cannot be handed over
  // is dropped (dropSegment), and its failure reaches every read that depends on it.
  void flush();
  // The start (or end) of a step of a loop (dt.graph.step): flushes, and the next segments are
  // full-sized (DTORCH_SEGMENT_NODES), so that every step of a loop is cut into the same
  // segments. The first step after a wait is cut as every step waited for alone is: its segments
  // start short and double, as after any wait, so that the idle GPU starts after the first ops
  // instead of a full segment (a forward waited for: its latency). In a loop without waits the
  // devices are busy, and short batches would only hold a GPU worker back (its batches in flight
  // are bounded).
  void beginStep();
  // The start of a top-level model call (Module.call). When the previous one, with what the
  // program recorded after it, took at least kCallStepNodes nodes, this is a step boundary
  // (beginStep), so a model called again and again is cut the same way each time without a mark.
  // Smaller calls (a tiny layer in a loop) are left to the usual limits: a flush per call would
  // cost several times what such a call does (docs/engine.md, "Segments").
  void beginCall();
  static constexpr uint64_t kCallStepNodes = 64;
  // Compiled calls (dt.graph.compile): a call's recording is traced once, then copied.
  // Starts keeping what is recorded from now on; INTERNAL when a trace is open already (the JS side runs inner compiled calls as they are).
  void beginTrace();
  // Ends the open trace, of a call on `arguments` that returned `outputs`: the trace's id (> 0),
  // or 0 with `why` when the call cannot be replayed by copying its nodes (call_trace.h).
  int64_t endTrace(c10::ArrayRef<int64_t> arguments, c10::ArrayRef<int64_t> outputs, std::string& why);
  // Drops the open trace, if any (the call threw).
  void abortTrace() { trace_.reset(); }
  // Records trace `traceId` again on `arguments`, as running the call would; false, recording
  // nothing, when they are not what it was traced on (metas, the same tensor in the same
  // positions) or a tensor it reads from before the call is gone. INVALID_ARGUMENT for an
  // unknown id.
  bool replayTrace(int64_t traceId, c10::ArrayRef<int64_t> arguments, Recorded& recorded);
  void dropTrace(int64_t traceId) { traces_.erase(traceId); }

  // Makes the next flush fail with `message`, as a failed hand-over would (tests only).
  void failNextFlush(std::string message) { injectedFlushFailure_ = std::move(message); }

  // Throws TENSOR_DISPOSED for an id that is not live.
  const TensorMeta& meta(int64_t id) const;
  MemoryStats memory() const;
  // The largest DTORCH_SEGMENT_NODES (packages/common/src/env.ts refuses more).
  static constexpr size_t kMaxFlushThreshold = 1000000;
  // Throws INVALID_ARGUMENT outside 1..kMaxFlushThreshold.
  void setFlushThreshold(int64_t nodes);

 private:
  Node& append(NodeKind kind);
  Recorded recordRedistribute(int64_t id, const Placements& placements);
  int64_t redistributeOnMesh(int64_t id, const Placements& placements);
  void track(const TensorMeta& meta, int sign);
  // Hands the open segment over when it reached the current limit; the limit then doubles.
  void flushWhenFull();
  // Flushes before the program waits (a read, a sync): the devices go idle, so the next
  // segments start short and grow, and the first kernels run while the program still records.
  void flushBeforeWait();
  // A fresh open segment with room for the next segment's nodes (at most kReservedNodes: a
  // larger one grows as it fills, so a high threshold never asks for its memory up front).
  std::shared_ptr<Segment> freshSegment() const;
  // The segment was not handed over: its reads and syncs fail with `why` now, its outputs are
  // lost (a read of one, or of anything computed from one, fails the same way), and its releases
  // are recorded again so that the workers still free what earlier segments made.
  void dropSegment(Segment& segment, const std::string& why);
  // A node computed from a lost tensor: its outputs are lost too (the workers never had the input).
  void loseOutputsOfLost(const Node& node);
  // For a read of `id`: delivers the error that lost the tensor and returns true, if it was lost.
  bool failedAsLost(int64_t id, const std::shared_ptr<Completion>& completion);

  // Keeps the nodes of `segment` that the open trace has not yet kept (before it is handed over).
  void keepTraced(const Segment& segment);
  // Appends a copy of traced compute node `traced` on inputs `inputs`; its outputs' ids are added to `made`.
  void replayCompute(const TracedNode& traced, c10::ArrayRef<int64_t> inputs, std::vector<int64_t>& made);

  // The trace being recorded: the nodes kept so far, and where in the open segment it goes on.
  struct OpenTrace {
    std::vector<Node> nodes;
    size_t from = 0;
    std::string broken;  // why it cannot be a trace, found while it was recorded
  };

  const MeshTable& meshes_;
  SegmentSink& sink_;
  std::unique_ptr<OpenTrace> trace_;
  std::unordered_map<int64_t, std::shared_ptr<const CallTrace>> traces_;
  int64_t nextTraceId_ = 1;
  std::shared_ptr<Segment> open_;
  common::IdMap<TensorMeta> live_{4096};
  // live tensors whose producer was in a dropped segment, with the reason (usually empty)
  common::IdMap<std::shared_ptr<const std::string>> lost_;
  std::string injectedFlushFailure_;
  std::function<void(const Segment&)> tap_;
  std::unordered_map<int64_t, DeviceMemory> perDevice_;  // key: kind * 2^32 + index
  int64_t liveBytes_ = 0;
  int64_t nextId_ = 1;
  uint64_t nextSeq_ = 1;
  uint64_t lastCallSeq_ = 0;  // nextSeq_ at the last beginCall
  size_t flushThreshold_ = 256;
  // the size at which the open segment is handed over: kFirstAfterWait after a wait, doubling
  // up to flushThreshold_
  static constexpr size_t kFirstAfterWait = 32;
  static constexpr size_t kReservedNodes = 4096;
  size_t segmentLimit_ = kFirstAfterWait;
  bool replaying_ = false;  // replayTrace is copying: its segments are all of its own size
  bool waitedBeforeStep_ = true;  // a wait came since the last beginStep (the engine starts idle)
};

}  // namespace dtorch::core
