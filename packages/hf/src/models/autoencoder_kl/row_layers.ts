// The VAE's layers over a RowSplit (an activation split by rows, one piece per device), each
// giving the pieces of what the layer gives the whole image: convolutions over halo rows, group
// norms whose statistics are reduced over all the pieces, the mid block's attention over the
// keys and values of every piece, nearest upsampling piece by piece. The modules' own weights
// are read through LocalWeights (each piece's device's view of a replicated weight), so the
// model code stays the single-device one and this file only says how each layer splits.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type * as nn from '@dtorch/nn';
import type { DownEncoderBlock2D, UNetMidBlock2D, UpDecoderBlock2D } from './blocks.js';
import type { ResnetBlock2D } from './resnet_block_2d.js';
import { RowSplit } from './row_split.js';
import { through } from './through.js';
import type { Downsample2D, Upsample2D } from './sampling.js';
import type { Decoder, Encoder } from './vae.js';
import type { VAEAttention } from './vae_attention.js';

/** Each piece's device's view of a module's replicated weights (toLocal: no copy), made once per forward. */
export class LocalWeights {
  private readonly views: Map<dt.Tensor, dt.Tensor>[];

  /** Views of `module`'s parameters on the device of each rank of `ranks` (piece i on ranks[i]). */
  constructor(module: nn.Module, ranks: readonly number[]) {
    const params = module.parameters();
    this.views = ranks.map((rank) => new Map(params.map((p) => [p as dt.Tensor, dt.keep(p.toLocal(rank))])));
  }

  /** `param` on piece `piece`'s device; undefined stays undefined (a layer without bias). */
  at<T extends dt.Tensor | undefined>(param: T, piece: number): T {
    if (param === undefined) return undefined as T;
    const view = this.views[piece]!.get(param);
    if (!view) throw new DTorchError(ErrorCode.Internal, `patch-parallel VAE: a weight ${param.describe()} is not one of the module's parameters`);
    return view as T;
  }

  /** Frees the views (the weights stay). */
  dispose(): void {
    for (const views of this.views) dt.dispose([...views.values()]);
  }
}

type Step = (x: RowSplit) => RowSplit;


function pair(v: dt.F.Pair | 'valid' | 'same' | undefined, fallback: number): [number, number] {
  if (v === undefined) return [fallback, fallback];
  if (typeof v === 'string') throw new DTorchError(ErrorCode.InvalidArgument, `patch-parallel VAE: convolution padding '${v}' is not one the VAE uses (numbers)`);
  return typeof v === 'number' ? [v, v] : [v[0], v[1]];
}

/**
 * A stride-1 convolution whose row padding keeps the row count (the VAE's 3x3 padding 1 and
 * its 1x1s): over each piece with as many halo rows as the padding, padded only on the sides.
 */
export function rowConv(x: RowSplit, conv: nn.Conv2d, w: LocalWeights): RowSplit {
  const [padRows, padCols] = pair(conv.conv.padding, 0);
  const stride = pair(conv.conv.stride, 1);
  const dilation = pair(conv.conv.dilation, 1);
  if (stride.some((s) => s !== 1) || dilation.some((d) => d !== 1) || 2 * padRows !== conv.kernelSize[0] - 1) {
    throw new DTorchError(ErrorCode.InvalidArgument, `patch-parallel VAE: a convolution ${conv.extraRepr()} does not keep the row count (stride 1, padding (kernel - 1) / 2)`);
  }
  const input = padRows > 0 ? x.haloed(padRows) : x;
  const out = input.map((p, i) => dt.F.conv2d(p, w.at(conv.weight, i), w.at(conv.bias, i), { padding: [0, padCols], groups: conv.conv.groups ?? 1 }));
  if (input !== x) input.dispose();
  return out;
}

/**
 * torch's group_norm of the whole image: each group's mean, then its variance about that mean,
 * summed over every piece (two passes, in float32, so that the statistics equal one device's
 * to rounding even in 16-bit floats), then each piece normalised and scaled alone.
 */
export function rowGroupNorm(x: RowSplit, norm: nn.GroupNorm, w: LocalWeights): RowSplit {
  const groups = norm.numGroups;
  const [batch, channels, , width] = x.pieces[0]!.shape as [number, number, number, number];
  const count = (channels / groups) * x.rows * width;
  const grouped = (p: dt.Tensor) => (p.dtype === 'float32' ? p : p.to('float32')).reshape([batch, groups, -1]);
  const pieces = dt.tidy(() => {
    const means = x.allReduceSum(x.pieces.map((p) => dt.tidy(() => grouped(p).sum(2)))).map((s) => s.div(count).unsqueeze(2));
    const centered = (p: dt.Tensor, i: number) => grouped(p).sub(means[i]!);
    const variances = x.allReduceSum(x.pieces.map((p, i) => dt.tidy(() => centered(p, i).square().sum(2)))).map((s) => s.div(count).unsqueeze(2));
    return x.pieces.map((p, i) =>
      dt.tidy(() => {
        let y = centered(p, i).mul(variances[i]!.add(norm.eps).rsqrt()).reshape(p.shape);
        const [weight, bias] = [w.at(norm.weight, i), w.at(norm.bias, i)];
        if (weight) y = y.mul(weight.to('float32').reshape([channels, 1, 1]));
        if (bias) y = y.add(bias.to('float32').reshape([channels, 1, 1]));
        return y.dtype === p.dtype ? y : y.to(p.dtype);
      }),
    );
  });
  return new RowSplit(pieces);
}

function linear(x: dt.Tensor, layer: nn.Linear, w: LocalWeights, piece: number): dt.Tensor {
  if (layer.weight_scale !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, 'patch-parallel VAE: the attention linears must hold float weights, not FP8');
  return dt.F.linear(x, w.at(layer.weight, piece), w.at(layer.bias, piece));
}

/** The mid block's attention over all pixels: each piece's queries against every piece's keys and values (gathered), then the residual. */
export function rowAttention(x: RowSplit, attn: VAEAttention, w: LocalWeights): RowSplit {
  const normed = rowGroupNorm(x, attn.group_norm, w);
  const pieces = dt.tidy(() => {
    const tokens = normed.pieces.map((p) => {
      const [batch, channels, rows, width] = p.shape as [number, number, number, number];
      return p.reshape([batch, channels, rows * width]).transpose(1, 2);
    });
    const keys = x.allGather(tokens.map((t, i) => linear(t, attn.to_k, w, i)), 1);
    const values = x.allGather(tokens.map((t, i) => linear(t, attn.to_v, w, i)), 1);
    return tokens.map((t, i) =>
      dt.tidy(() => {
        const out = dt.F.scaledDotProductAttention(linear(t, attn.to_q, w, i), keys[i]!, values[i]!, { heads: attn.heads });
        return linear(out, attn.to_out.at(0), w, i).transpose(1, 2).reshape(x.pieces[i]!.shape).add(x.pieces[i]!);
      }),
    );
  });
  normed.dispose();
  return new RowSplit(pieces);
}

/** ResnetBlock2D over the pieces: norm, act, conv, norm, act, conv, plus the (1x1-projected) input. */
export function rowResnet(x: RowSplit, block: ResnetBlock2D, w: LocalWeights): RowSplit {
  const act = (t: RowSplit) => t.map((p) => block.act(p));
  const out = through(x, [
    (t) => rowGroupNorm(t, block.norm1, w),
    act,
    (t) => rowConv(t, block.conv1, w),
    (t) => rowGroupNorm(t, block.norm2, w),
    act,
    (t) => rowConv(t, block.conv2, w),
  ]);
  const skip = block.conv_shortcut ? rowConv(x, block.conv_shortcut, w) : x;
  const sum = out.map((p, i) => skip.pieces[i]!.add(p));
  out.dispose();
  if (skip !== x) skip.dispose();
  return sum;
}

/**
 * Downsample2D over the pieces: each piece with the row below it (zeros under the last: the
 * bottom padding), padded right by one, then the 3x3 stride-2 conv. Every piece but the last
 * must start on an even row and hold an even count (splitRows for encoding sees to it).
 */
export function rowDownsample(x: RowSplit, down: Downsample2D, w: LocalWeights): RowSplit {
  const below = x.withRowsBelow(1);
  const out = below.map((p, i) => dt.F.conv2d(dt.F.pad(p, [0, 1, 0, 0]), w.at(down.conv.weight, i), w.at(down.conv.bias, i), { stride: 2 }));
  below.dispose();
  return out;
}

/** Upsample2D over the pieces: nearest x2 is piece by piece (row i of the output is row i / 2 of the input), then the 3x3 conv. */
export function rowUpsample(x: RowSplit, up: Upsample2D, w: LocalWeights): RowSplit {
  return through(x, [(t) => t.map((p) => dt.F.interpolate(p, { scaleFactor: 2, mode: 'nearest' })), (t) => rowConv(t, up.conv, w)]);
}

const resnetSteps = (resnets: Iterable<ResnetBlock2D>, w: LocalWeights): Step[] => [...resnets].map((r) => (t: RowSplit) => rowResnet(t, r, w));

function rowDownBlock(x: RowSplit, block: DownEncoderBlock2D, w: LocalWeights): RowSplit {
  return through(x, [...resnetSteps(block.resnets, w), ...[...(block.downsamplers ?? [])].map((d) => (t: RowSplit) => rowDownsample(t, d, w))]);
}

function rowUpBlock(x: RowSplit, block: UpDecoderBlock2D, w: LocalWeights): RowSplit {
  return through(x, [...resnetSteps(block.resnets, w), ...[...(block.upsamplers ?? [])].map((u) => (t: RowSplit) => rowUpsample(t, u, w))]);
}

function rowMidBlock(x: RowSplit, block: UNetMidBlock2D, w: LocalWeights): RowSplit {
  const attentions: Step[] = [...block.attentions].map((a) => (t: RowSplit) => rowAttention(t, a, w));
  return through(x, [(t) => rowResnet(t, block.resnets.at(0), w), ...attentions, (t) => rowResnet(t, block.resnets.at(1), w)]);
}

// norm, SiLU (as vae.ts's head) and conv_out
function head(norm: nn.GroupNorm, conv: nn.Conv2d, w: LocalWeights): Step[] {
  return [(t) => rowGroupNorm(t, norm, w), (t) => t.map((p) => dt.F.silu(p)), (t) => rowConv(t, conv, w)];
}

/** Encoder.forward over the pieces (rows split as splitRows does for encoding). */
export function rowEncoder(x: RowSplit, encoder: Encoder, w: LocalWeights): RowSplit {
  return through(x, [
    (t) => rowConv(t, encoder.conv_in, w),
    ...[...encoder.down_blocks].map((b) => (t: RowSplit) => rowDownBlock(t, b, w)),
    (t) => rowMidBlock(t, encoder.mid_block, w),
    ...head(encoder.conv_norm_out, encoder.conv_out, w),
  ]);
}

/** Decoder.forward over the pieces. */
export function rowDecoder(x: RowSplit, decoder: Decoder, w: LocalWeights): RowSplit {
  return through(x, [
    (t) => rowConv(t, decoder.conv_in, w),
    (t) => rowMidBlock(t, decoder.mid_block, w),
    ...[...decoder.up_blocks].map((b) => (t: RowSplit) => rowUpBlock(t, b, w)),
    ...head(decoder.conv_norm_out, decoder.conv_out, w),
  ]);
}
