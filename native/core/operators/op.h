// OpDef: everything the engine knows about one operator, kept together: its name, arity,
// attribute layout, meta inference (record time, JS thread) and kernel (worker thread).
// Each op family registers its OpDefs from one file (elementwise.cpp, matmul.cpp, ...).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <string_view>

#include "core/operand/layout.h"
#include "core/operand/mesh.h"
#include "core/operand/meta.h"
#include "core/operators/signature.h"
#include "core/program/node.h"

namespace dtorch::core {

class MeshTable;

// Inputs of meta inference: metas of the input tensors and the numeric attributes. Infer may
// append derived attributes (for the kernel) and attach state to the node (e.g. a plan).
struct InferContext {
  const struct OpDef& op;
  c10::ArrayRef<const TensorMeta*> inputs;
  c10::ArrayRef<double> attrs;
  const MeshTable& meshes;
  c10::SmallVector<double, 4>& derived;
  std::shared_ptr<const OpState>& state;

  double attr(size_t i) const;
  // An integer attribute: fails unless attr(i) is an exact integer (magnitude below 2^53), so
  // that no out-of-range double is ever cast (the cast would be undefined, in practice INT64_MIN).
  int64_t intAttr(size_t i) const;
  // Throws a DTorchError whose message starts with the op name.
  [[noreturn]] void fail(const char* code, const std::string& message) const;
};

using Outputs = c10::SmallVector<TensorMeta, 1>;

// What a kernel sees on a worker: the node, its rank, local input blobs, outputs to set.
struct KernelContext {
  const Node& node;
  int rank;
  const DeviceMesh& mesh;
  c10::Device device;
  c10::SmallVector<const at::Tensor*, 4> inputs;
  c10::SmallVector<at::Tensor, 2> outputs;
  // Set by kernels whose outputs are still being produced on another stream when they return
  // (collectives on the communication stream): the marker their consumers wait for.
  std::shared_ptr<void> outputsReady;
  // The latest worker batch that produced an input (see external::cuda::CommunicationScope).
  uint64_t inputsBatch = 0;
  // Ops that communicate: per input, the marker of the end of the work that made it (null: none
  // was recorded).
  c10::SmallVector<std::shared_ptr<void>, 4> inputsMade;

  const at::Tensor& input(size_t i) const { return *inputs[i]; }
  double attr(size_t i) const { return node.attrs[i]; }
  int64_t intAttr(size_t i) const { return static_cast<int64_t>(node.attrs[i]); }
  const TensorMeta& outputMeta(size_t i = 0) const { return node.outputMetas[i]; }
  // This rank's piece of output i: its shape and offset in the full tensor.
  LocalPiece outputPiece(size_t i = 0) const;
  // This rank's piece of input i (ops with keepsInputMetas only).
  LocalPiece inputPiece(size_t i) const;
};

using InferFn = void (*)(const InferContext&, Outputs&);
using KernelFn = void (*)(KernelContext&);

struct OpDef {
  std::string_view name;
  int numInputs;          // -1: any number (>= 1)
  std::string_view attrs; // attribute layout, for readers and error messages
  InferFn infer;          // shapes and dtypes (and placements, for ops that place their outputs)
  KernelFn kernel;
  RowsFn rows = nullptr;  // placement signature rows; nullptr: infer places the outputs itself
  // Optional: the same op writing into input 0's buffer (ctx.outputs gets that tensor). The
  // controller offers it when input 0 dies at this node; the worker uses it only when the
  // buffer is not shared and already has the output's shape and dtype.
  KernelFn inplace = nullptr;
  // The input lives on another mesh: the controller has input ranks send it (kSend: rank 0 only,
  // or every rank with sendsFromEveryInputRank) and the output ranks' kernels receive it through
  // the node's state instead of looking it up locally.
  bool receivesFromInputMesh = false;
  bool sendsFromEveryInputRank = false;
  // The family's own description of this op (e.g. its entry in the family's table).
  const void* family = nullptr;
  // Kernels need the inputs' global metas (e.g. where a rank's rows start): kept on the node.
  bool keepsInputMetas = false;
  // The kernel runs on the worker's communication stream (a redistribute): the controller has the
  // producers of its inputs mark where they end on the compute stream, so that it waits for them
  // and not for the compute queued after them.
  bool communicates = false;
  // The kernel computes on the host and copies its result to the device (random numbers from a
  // CPU generator, the program's data): a CUDA graph cannot replay that, so it is never captured.
  bool hostSide = false;
};

}  // namespace dtorch::core
