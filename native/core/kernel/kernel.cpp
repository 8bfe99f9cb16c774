#include "core/kernel/kernel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "common/error.h"
#include "common/log.h"
#include "core/blob/blob_table.h"
#include "core/communication/rendezvous.h"
#include "core/operators/op.h"
#include "core/program/completion.h"
#include "external/cuda/device_sync.h"

namespace dtorch::core {
namespace {

c10::Device torchDevice(const Device& d) {
  return d.kind == DeviceKind::kCpu ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d.index));
}

void poisonOutputs(const Node& node, BlobTable& blobs, std::shared_ptr<const KernelError> error) {
  for (int64_t id : node.outputs) blobs.put(id, Blob{at::Tensor(), error, nullptr, nullptr, external::cuda::kCurrentBatch, nullptr});
}

// The kernel must produce exactly what meta inference promised (this rank's piece of it); a
// mismatch is an engine bug, reported as a kernel failure rather than corrupting later shapes.
void checkOutputs(const KernelContext& ctx) {
  const Node& node = ctx.node;
  if (ctx.outputs.size() != node.outputs.size()) {
    common::fail(common::code::kInternal, "kernel produced " + std::to_string(ctx.outputs.size()) + " outputs, expected " +
                                              std::to_string(node.outputs.size()));
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const TensorMeta& meta = node.outputMetas[i];
    const at::Tensor& t = ctx.outputs[i];
    const Shape local = ctx.outputPiece(i).shape;
    if (t.scalar_type() != meta.dtype || t.sizes() != at::IntArrayRef(local)) {
      common::fail(common::code::kInternal,
                   "kernel output " + std::to_string(i) + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                       " and shape " + c10::str(t.sizes()) + ", but meta inference promised " +
                       std::string(dtypeName(meta.dtype)) + " " + formatShape(local) + " on rank " + std::to_string(ctx.rank));
    }
  }
}

// Input 0's buffer can hold the output when nothing else refers to it (no other blob, no view)
// and it already has the output's shape and dtype.
bool canReuse(const at::Tensor& t, const TensorMeta& out) {
  return t.use_count() == 1 && t.storage().use_count() == 1 && !t.is_view() && t.scalar_type() == out.dtype &&
         t.sizes() == at::IntArrayRef(out.shape) && t.is_contiguous();
}

// When every output of this rank is empty (an uneven shard), fills ctx.outputs with empty
// tensors of the right shapes and returns true. Ops with state (collectives) always run: they
// must still meet their group.
bool emptyOutputs(KernelContext& ctx) {
  c10::SmallVector<Shape, 2> shapes;
  for (size_t i = 0; i < ctx.node.outputMetas.size(); ++i) {
    const TensorMeta& meta = ctx.node.outputMetas[i];
    if (meta.numel() != 0 && !anyShard(meta.placements)) {
      return false;  // unsharded and not empty: the common case, decided without layout math
    }
    shapes.push_back(ctx.outputPiece(i).shape);
    if (std::find(shapes.back().begin(), shapes.back().end(), 0) == shapes.back().end()) return false;
  }
  if (shapes.empty()) return false;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ctx.outputs.push_back(at::empty(shapes[i], at::TensorOptions().dtype(ctx.node.outputMetas[i].dtype).device(ctx.device)));
  }
  return true;
}

// `device`: the worker's, this host's own (a cluster-wide index in the mesh may name another GPU).
void runCompute(const Kernel& k, BlobTable& blobs, const Device& device) {
  const Node& node = *k.node;
  KernelContext ctx{node, k.rank, *k.mesh, torchDevice(device), {}, {}, nullptr, 0, {}};
  if (node.op->receivesFromInputMesh || node.inputs.empty()) ctx.inputsBatch = external::cuda::kCurrentBatch;
  // a transfer's input is on another mesh: it arrives through the node's state instead
  const auto localInputs = node.op->receivesFromInputMesh ? c10::ArrayRef<int64_t>() : c10::ArrayRef<int64_t>(node.inputs);
  for (int64_t id : localInputs) {
    // a communicating op orders itself after its inputs' producers on its own stream (below), so
    // the compute stream is not made to wait for a collective that is still writing an input
    const Blob* blob = node.op->communicates ? blobs.find(id) : settledBlob(blobs, id);
    if (!blob) {
      auto error = std::make_shared<KernelError>(KernelError{
          std::string(node.op->name), "input tensor " + std::to_string(id) + " is missing on this worker", node.seq});
      if (node.state) node.state->abandon(*k.mesh, k.rank, error);  // nobody waits for this rank
      poisonOutputs(node, blobs, error);
      return;
    }
    if (blob->error) {  // an upstream failure flows through without running this op
      if (node.state) node.state->abandon(*k.mesh, k.rank, blob->error);  // nobody waits for this rank
      poisonOutputs(node, blobs, blob->error);
      return;
    }
    ctx.inputs.push_back(&blob->tensor);
    ctx.inputsBatch = std::max(ctx.inputsBatch, blob->batch);
    if (node.op->communicates) ctx.inputsMade.push_back(blob->pending ? blob->pending : blob->made);
  }
  const bool reuse = k.mayReuseInput && node.op->inplace && canReuse(*ctx.inputs[0], node.outputMetas[0]);
  if (reuse) {
    const Blob* first = blobs.find(node.inputs[0]);
    external::cuda::waitFor(first->readBy, first->tensor);  // a collective may still be reading it
  }
  try {
    if (!node.state && emptyOutputs(ctx)) {
      // nothing to compute: some LibTorch kernels fault on empty pieces (torch 2.11's CPU
      // attention divides by a zero head count), so an empty piece never reaches them
    } else {
      (reuse ? node.op->inplace : node.op->kernel)(ctx);
    }
    checkOutputs(ctx);
  } catch (const std::exception& e) {
    DTORCH_LOG(common::LogLevel::kDebug, "kernel " << node.op->name << " #" << node.seq << " failed: " << errorText(e));
    poisonOutputs(node, blobs, std::make_shared<KernelError>(KernelError{std::string(node.op->name), errorText(e), node.seq, kernelErrorCode(e)}));
    return;
  }
  if (reuse) blobs.erase(node.inputs[0]);  // its buffer now belongs to the output
  if (ctx.outputsReady) {  // the inputs are read on another stream until then
    for (int64_t id : localInputs) {
      if (Blob* input = blobs.findMutable(id)) input->readBy = ctx.outputsReady;
    }
  }
  const uint64_t batch = external::cuda::batchesEnded();
  // where this op's compute ends, for a collective of the segment that reads its output
  const std::shared_ptr<void> made = k.markMade && !ctx.outputsReady && !ctx.outputs.empty() ? external::cuda::markReady(ctx.outputs[0]) : nullptr;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    blobs.put(node.outputs[i], Blob{std::move(ctx.outputs[i]), nullptr, ctx.outputsReady, nullptr, batch, made});
  }
}

// A read: the tensor (float16/bfloat16/float8 as float32) copied to host memory; on CUDA asynchronously
// into pinned memory, delivered once the copy has landed while the worker goes on.
void runFetch(const Kernel& k, BlobTable& blobs) {
  const Node& node = *k.node;
  FetchResult result;
  const Blob* blob = settledBlob(blobs, node.inputs[0]);
  if (!blob) {
    result.ok = false;
    result.code = common::code::kInternal;
    result.message = "tensor " + std::to_string(node.inputs[0]) + " is missing on its worker";
  } else if (blob->error) {
    result.ok = false;
    result.code = blob->error->code;
    result.op = blob->error->op;
    result.seq = blob->error->seq;
    result.message = blob->error->message;
  } else {
    try {
      at::Tensor t = blob->tensor;
      const DType dtype = t.scalar_type();
      if (dtype == at::kHalf || dtype == at::kBFloat16 || isFloat8(dtype)) t = t.to(at::kFloat);
      external::cuda::copyToHost(t, [completion = node.completion, dtype](at::Tensor host) {
        FetchResult landed;
        landed.dtype = dtype;
        landed.host = std::move(host);
        completion->deliver(std::move(landed));
      });
      return;
    } catch (const std::exception& e) {
      result.ok = false;
      result.code = common::code::kKernelFailed;
      result.op = "fetch";
      result.message = errorText(e);
      result.seq = node.seq;
    }
  }
  node.completion->deliver(std::move(result));
}

// A sync's share on one worker: its GPU streams drained (bounded by the collective timeout, so a
// GPU that never finishes is reported), then the last worker to arrive completes the sync.
void runSync(const Kernel& k, const Device& device) {
  Completion& completion = *k.node->completion;
  const bool drained = device.kind != DeviceKind::kCuda || external::cuda::synchronizeThisThread(collectiveTimeout());
  FetchResult result;
  if (!drained) {
    result.ok = false;
    result.code = common::code::kTimeout;
    result.op = "sync";
    result.message = "the GPU work of " + device.name() + " did not finish within " + std::to_string(collectiveTimeout().count()) +
                     " ms (a collective whose peers never joined? raise DTORCH_COLLECTIVE_TIMEOUT_MS for long work)";
  }
  completion.finishPart(std::move(result));
}

void runSend(const Kernel& k, BlobTable& blobs) {
  const Blob* blob = settledBlob(blobs, k.node->inputs[0]);
  if (!blob) {
    k.node->state->send(k.rank, nullptr, std::make_shared<KernelError>(KernelError{std::string(k.node->op->name), "input is missing on its worker", k.node->seq}));
  } else {
    k.node->state->send(k.rank, blob->error ? nullptr : &blob->tensor, blob->error);
  }
}

}  // namespace

std::string errorText(const std::exception& e) {
  if (auto* c10err = dynamic_cast<const c10::Error*>(&e)) return c10err->what_without_backtrace();
  return e.what();
}

const Blob* settledBlob(BlobTable& blobs, int64_t id) {
  Blob* blob = blobs.findMutable(id);
  if (blob && blob->pending) {
    external::cuda::waitFor(blob->pending, blob->tensor);
    blob->pending.reset();
  }
  return blob;
}

LocalPiece KernelContext::outputPiece(size_t i) const {
  const TensorMeta& meta = node.outputMetas[i];
  return localPiece(meta.shape, meta.placements, mesh, rank);
}

LocalPiece KernelContext::inputPiece(size_t i) const {
  const TensorMeta& meta = node.inputMetas.at(i);
  return localPiece(meta.shape, meta.placements, mesh, rank);
}

void cancelKernel(const Kernel& k, const std::shared_ptr<const KernelError>& why) {
  if (!k.node || !k.node->state) return;
  if (k.kind == Kernel::Kind::kRun) k.node->state->abandon(*k.mesh, k.rank, why);
  else if (k.kind == Kernel::Kind::kSend) k.node->state->send(k.rank, nullptr, why);
}

void executeKernel(const Kernel& k, BlobTable& blobs, const Device& device) {
  switch (k.kind) {
    case Kernel::Kind::kRun: runCompute(k, blobs, device); break;
    case Kernel::Kind::kFree: blobs.erase(k.id); break;
    case Kernel::Kind::kFetch: runFetch(k, blobs); break;
    case Kernel::Kind::kSend: runSend(k, blobs); break;
    case Kernel::Kind::kSync: runSync(k, device); break;
  }
}

}  // namespace dtorch::core
