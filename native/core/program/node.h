// Node: one recorded step of the client's program. Compute nodes run an operator; the other
// kinds are system steps the controller lowers itself (release, fetch, sync).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>

#include "core/operand/meta.h"

namespace dtorch::core {

struct OpDef;
struct Completion;

// State an op attaches to its node at record time (e.g. a redistribute plan with its
// rendezvous points), shared by the node's kernels on every rank.
struct KernelError;
struct DeviceMesh;
struct OpState {
  virtual ~OpState() = default;
  // Rank `rank` cannot take part (its input failed): release whoever waits for it.
  virtual void abandon(const DeviceMesh& mesh, int rank, const std::shared_ptr<const KernelError>& error) const {}
  // kSend: input rank `rank` hands over its piece (or the error that replaced it).
  virtual void send(int rank, const at::Tensor* piece, std::shared_ptr<const KernelError> error) const {}
};

enum class NodeKind : uint8_t { kCompute, kRelease, kFetch, kSync };

struct Node {
  NodeKind kind = NodeKind::kCompute;
  uint64_t seq = 0;                     // record order; names the JS call site in errors
  const OpDef* op = nullptr;            // kCompute only
  int meshId = 0;                       // mesh of the outputs (kCompute), of the tensor (others)
  int inputMeshId = 0;                  // mesh of the inputs (kCompute with inputs)
  c10::SmallVector<int64_t, 4> inputs;  // tensor ids read (kCompute, kFetch)
  c10::SmallVector<int64_t, 2> outputs; // tensor ids written (kCompute) or released (kRelease)
  c10::SmallVector<double, 8> attrs;    // op attributes, layout documented per op
  uint32_t userAttrs = 0;               // how many of attrs the program gave (infer derived the rest)
  c10::SmallVector<TensorMeta, 1> outputMetas;
  c10::SmallVector<TensorMeta, 1> inputMetas;  // only for ops that keep them (OpDef::keepsInputMetas)
  at::Tensor hostData;                  // full host tensor for ops created from JS data
  std::shared_ptr<Completion> completion;  // kFetch, kSync
  std::shared_ptr<const OpState> state;    // kCompute, set by the op's infer
};

}  // namespace dtorch::core
