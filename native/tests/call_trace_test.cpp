// headCut: where a compiled call's copy hands its first part over. Among the positions after a
// quarter to a half of the compute nodes it takes the one with the fewest bytes of the call's
// own tensors alive across it (returned tensors count to the end); short calls and a minimum of
// 0 are handed over whole.
#include <cstdint>
#include <vector>

#include "core/graph/call_trace.h"
#include "tests/check.h"

using namespace dtorch::core;

namespace {

// A chain of compute nodes, node i making one float tensor of bytes[i] from node i-1's, which is
// released right after it (the last one is returned): [c0, c1, r0, c2, r1, c3, r2, ...].
CallTrace chain(const std::vector<int64_t>& bytes) {
  CallTrace trace;
  for (size_t i = 0; i < bytes.size(); ++i) {
    TracedNode& compute = trace.nodes.emplace_back();
    compute.node.kind = NodeKind::kCompute;
    TensorMeta meta;
    meta.shape = {bytes[i] / 4};
    meta.dtype = DType::Float;
    compute.node.outputMetas.push_back(meta);
    if (i > 0) compute.inputs.push_back({TraceRef::Role::kMade, static_cast<int64_t>(i - 1)});
    ++trace.made;
    if (i > 0) {
      TracedNode& release = trace.nodes.emplace_back();
      release.node.kind = NodeKind::kRelease;
      release.inputs.push_back({TraceRef::Role::kMade, static_cast<int64_t>(i - 1)});
    }
  }
  trace.outputs.push_back(static_cast<int64_t>(bytes.size() - 1));
  return trace;
}

// The trace position just before compute node k (nodes: c0, then c_k at 2k - 1).
size_t before(size_t k) { return k == 0 ? 0 : 2 * k - 1; }

}  // namespace

int main() {
  // 64 compute nodes of 4 KiB each, but node 23 makes 64 bytes: the window is 16 to 32 compute
  // nodes done, and the fewest bytes cross just before node 24 (node 11's 64 bytes, before the
  // window, do not count).
  std::vector<int64_t> bytes(64, 4096);
  bytes[11] = 64;
  bytes[23] = 64;
  const CallTrace trace = chain(bytes);
  const size_t cut = headCut(trace, 64);
  CHECK(cut != 0);
  CHECK(cut == before(24));  // after r22: only c23's 64 bytes alive across it
  // in the window [a quarter, a half] of the compute nodes
  int64_t computeBefore = 0;
  for (size_t i = 0; i < cut; ++i) computeBefore += trace.nodes[i].node.kind == NodeKind::kCompute;
  CHECK(computeBefore >= 64 / 4 && computeBefore <= 64 / 2);

  // below the minimum, or with a minimum of 0: whole
  CHECK(headCut(trace, 65) == 0);
  CHECK(headCut(trace, 0) == 0);
  // a call of fewer than 8 compute nodes is never cut
  CHECK(headCut(chain(std::vector<int64_t>(7, 4096)), 1) == 0);
  // all alike: the first position of the window
  const CallTrace even = chain(std::vector<int64_t>(64, 4096));
  const size_t evenCut = headCut(even, 1);
  int64_t evenBefore = 0;
  for (size_t i = 0; i < evenCut; ++i) evenBefore += even.nodes[i].node.kind == NodeKind::kCompute;
  CHECK(evenBefore == 64 / 4);
  return 0;
}
