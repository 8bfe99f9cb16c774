// Image ops on [N, C, H, W]: conv2d, interpolate (nearest, bilinear), avg_pool2d, max_pool2d.
// Rows: the batch dim shards through every one of them; channels too where each channel is
// computed alone (interpolate, pools).
#include <ATen/ATen.h>

#include <cmath>

#include "common/env.h"
#include "common/error.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

using common::code::kInvalidArgument;
using common::code::kShapeMismatch;

void check4d(const InferContext& ctx) {
  const TensorMeta& x = *ctx.inputs[0];
  if (x.ndim() != 4) ctx.fail(kShapeMismatch, "needs an input [N, C, H, W], got " + formatShape(x.shape));
  if (!isFloating(x.dtype)) ctx.fail(common::code::kDtypeMismatch, "needs a floating input, got " + std::string(dtypeName(x.dtype)));
}

// floor((in + 2 pad - dilation (kernel - 1) - 1) / stride) + 1, as LibTorch sizes conv and pool
// outputs: floor, not C++'s truncation, so that a kernel larger than its input gives 0, and in
// 128 bits, so that no size overflows on the way.
int64_t convOut(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const __int128 span = static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) - static_cast<__int128>(dilation) * (kernel - 1) - 1;
  const __int128 q = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
  const __int128 n = q + 1;
  return n > INT64_MAX ? INT64_MAX : static_cast<int64_t>(n);
}

// ---- conv2d(x, w, bias?): attrs stride h w, padding h w, dilation h w, groups ------------------

void inferConv(const InferContext& ctx, Outputs& out) {
  if (ctx.inputs.size() < 2 || ctx.inputs.size() > 3) ctx.fail(kInvalidArgument, "takes x, weight and an optional bias");
  check4d(ctx);
  const TensorMeta &x = *ctx.inputs[0], &w = *ctx.inputs[1];
  const int64_t sh = ctx.intAttr(0), sw = ctx.intAttr(1), ph = ctx.intAttr(2), pw = ctx.intAttr(3), dh = ctx.intAttr(4),
                dw = ctx.intAttr(5), groups = ctx.intAttr(6);
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0 || groups < 1) {
    ctx.fail(kInvalidArgument, "stride and dilation must be >= 1, padding >= 0, groups >= 1");
  }
  if (w.ndim() != 4 || x.shape[1] % groups != 0 || w.shape[1] * groups != x.shape[1] || w.shape[0] % groups != 0) {
    ctx.fail(kShapeMismatch, "weight " + formatShape(w.shape) + " does not fit input " + formatShape(x.shape) + " with " +
                                 std::to_string(groups) + " group(s): expected [out, C / groups, kh, kw] with out divisible by groups");
  }
  if (ctx.inputs.size() == 3 && (ctx.inputs[2]->ndim() != 1 || ctx.inputs[2]->shape[0] != w.shape[0])) {
    ctx.fail(kShapeMismatch, "bias must be [" + std::to_string(w.shape[0]) + "], got " + formatShape(ctx.inputs[2]->shape));
  }
  for (size_t k = 1; k < ctx.inputs.size(); ++k) {
    if (ctx.inputs[k]->dtype != x.dtype) {
      ctx.fail(common::code::kDtypeMismatch, std::string(k == 1 ? "weight" : "bias") + " is " + std::string(dtypeName(ctx.inputs[k]->dtype)) +
                                                 " but the input is " + std::string(dtypeName(x.dtype)) + "; cast with .to(dtype)");
    }
  }
  const int64_t oh = convOut(x.shape[2], w.shape[2], sh, ph, dh), ow = convOut(x.shape[3], w.shape[3], sw, pw, dw);
  if (oh <= 0 || ow <= 0) ctx.fail(kShapeMismatch, "the kernel does not fit the padded input " + formatShape(x.shape));
  out.push_back(outputLike(ctx, Shape{x.shape[0], w.shape[0], oh, ow}, x.dtype));
}
void convRows(const InferContext& ctx, SignatureRows& rows) {
  Placements in{Placement::shard(0)};
  in.append(ctx.inputs.size() - 1, Placement::replicate());
  rows.push_back(row(in, Placement::shard(0)));
}
// With DTORCH_CONV_CHANNELS_LAST=1, a 16-bit convolution on a GPU reads and writes channels last:
// cuDNN's fast kernels on Hopper take that layout, and an input laid out [N, C, H, W] (with the
// output back to it) costs a layout conversion each way per convolution (docs/gpu.md: a good part
// of a VAE decode). The output keeps the layout for what reads it: DTorch's group norm kernels
// take it, LibTorch's ops keep it or copy, transfers and collectives make their pieces
// contiguous. Off by default until a GPU run has shown it right and faster.
at::Tensor convInput(const at::Tensor& x) {
  const bool half = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  return common::settings().convChannelsLast && x.is_cuda() && half && x.dim() == 4 ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
}
void runConv(KernelContext& ctx) {
  const std::optional<at::Tensor> bias = ctx.inputs.size() == 3 ? std::optional<at::Tensor>(ctx.input(2)) : std::nullopt;
  ctx.outputs.push_back(at::conv2d(convInput(ctx.input(0)), ctx.input(1), bias, {ctx.intAttr(0), ctx.intAttr(1)},
                                   {ctx.intAttr(2), ctx.intAttr(3)}, {ctx.intAttr(4), ctx.intAttr(5)}, ctx.intAttr(6)));
}

// Batch and channels shard through ops that treat each channel alone.
void perChannelRows(const InferContext& ctx, SignatureRows& rows) {
  rows.push_back(row({Placement::shard(0)}, Placement::shard(0)));
  rows.push_back(row({Placement::shard(1)}, Placement::shard(1)));
}

// ---- interpolate: attrs mode (0 nearest, 1 bilinear), outH, outW, scaleH, scaleW (0: from the
// sizes), alignCorners -----------------------------------------------------------------------

void inferInterpolate(const InferContext& ctx, Outputs& out) {
  check4d(ctx);
  const TensorMeta& x = *ctx.inputs[0];
  const int64_t oh = ctx.intAttr(1), ow = ctx.intAttr(2);
  if (oh <= 0 || ow <= 0) ctx.fail(kInvalidArgument, "output size must be positive, got [" + std::to_string(oh) + ", " + std::to_string(ow) + "]");
  if (ctx.intAttr(0) != 0 && ctx.intAttr(0) != 1) ctx.fail(kInvalidArgument, "mode must be nearest or bilinear");
  out.push_back(outputLike(ctx, Shape{x.shape[0], x.shape[1], oh, ow}, x.dtype));
}
void runInterpolate(KernelContext& ctx) {
  const std::vector<int64_t> size{ctx.intAttr(1), ctx.intAttr(2)};
  const std::optional<double> sh = ctx.attr(3) > 0 ? std::optional<double>(ctx.attr(3)) : std::nullopt;
  const std::optional<double> sw = ctx.attr(4) > 0 ? std::optional<double>(ctx.attr(4)) : std::nullopt;
  if (ctx.intAttr(0) == 0) ctx.outputs.push_back(at::upsample_nearest2d(ctx.input(0), size, sh, sw));
  else ctx.outputs.push_back(at::upsample_bilinear2d(ctx.input(0), size, ctx.attr(5) != 0, sh, sw));
}

// ---- avg_pool2d / max_pool2d: attrs kernel h w, stride h w, padding h w ------------------------

void inferPool(const InferContext& ctx, Outputs& out) {
  check4d(ctx);
  const TensorMeta& x = *ctx.inputs[0];
  const int64_t kh = ctx.intAttr(0), kw = ctx.intAttr(1), sh = ctx.intAttr(2), sw = ctx.intAttr(3), ph = ctx.intAttr(4),
                pw = ctx.intAttr(5);
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0) ctx.fail(kInvalidArgument, "kernel and stride must be >= 1, padding >= 0");
  // LibTorch's pooling kernels take these as 32-bit ints
  for (int64_t v : {kh, kw, sh, sw, ph, pw}) {
    if (v > INT32_MAX) ctx.fail(kInvalidArgument, "kernel, stride and padding must be below 2^31, got " + std::to_string(v));
  }
  if (2 * ph > kh || 2 * pw > kw) ctx.fail(kInvalidArgument, "padding must be at most half the kernel size");
  const int64_t oh = convOut(x.shape[2], kh, sh, ph, 1), ow = convOut(x.shape[3], kw, sw, pw, 1);
  if (oh <= 0 || ow <= 0) ctx.fail(kShapeMismatch, "the kernel does not fit the padded input " + formatShape(x.shape));
  out.push_back(outputLike(ctx, Shape{x.shape[0], x.shape[1], oh, ow}, x.dtype));
}
void runAvgPool(KernelContext& ctx) {
  ctx.outputs.push_back(at::avg_pool2d(ctx.input(0), {ctx.intAttr(0), ctx.intAttr(1)}, {ctx.intAttr(2), ctx.intAttr(3)},
                                       {ctx.intAttr(4), ctx.intAttr(5)}));
}
void runMaxPool(KernelContext& ctx) {
  ctx.outputs.push_back(at::max_pool2d(ctx.input(0), {ctx.intAttr(0), ctx.intAttr(1)}, {ctx.intAttr(2), ctx.intAttr(3)},
                                       {ctx.intAttr(4), ctx.intAttr(5)}));
}

}  // namespace

void registerImageOps(OpRegistry& registry) {
  registry.add({"conv2d", -1, "stride h w, padding h w, dilation h w, groups", inferConv, runConv, convRows});
  registry.add({"interpolate", 1, "mode, outH, outW, scaleH, scaleW, alignCorners", inferInterpolate, runInterpolate, perChannelRows});
  registry.add({"avg_pool2d", 1, "kernel h w, stride h w, padding h w", inferPool, runAvgPool, perChannelRows});
  registry.add({"max_pool2d", 1, "kernel h w, stride h w, padding h w", inferPool, runMaxPool, perChannelRows});
}

}  // namespace dtorch::core
