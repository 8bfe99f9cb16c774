// Image ops of dt.functional on [N, C, H, W]: conv2d, interpolate, avgPool2d, maxPool2d.
import { DTorchError, ErrorCode, checkBoolean, checkInteger, checkKnownOptions, invalidParameter, isInteger } from '@dtorch/common';
import type { OpAttrs, OpName } from '@dtorch/core';
import { checkTensor, recordOp } from '../record.js';
import { Tensor } from '../tensor.js';

/** A size per spatial dim: one number for both H and W, or [h, w]. */
export type Pair = number | readonly [number, number];

function pair(name: string, v: Pair, min: number): [number, number] {
  const p = typeof v === 'number' ? [v, v] : v;
  if (!Array.isArray(p) || p.length !== 2 || !p.every((x) => isInteger(x) && x >= min)) {
    throw invalidParameter(name, `integer >= ${min} or a pair of them`, v);
  }
  return [p[0]!, p[1]!];
}

function record<N extends OpName>(name: N, inputs: readonly Tensor[], attrs: OpAttrs[N]): Tensor {
  inputs.forEach((t, i) => checkTensor(`${name} input #${i}`, t));
  return recordOp(name, inputs, attrs);
}

/** Options of {@link conv2d}, as torch.nn.functional.conv2d's. */
export interface Conv2dOptions {
  /** Step of the kernel over H and W (default 1). */
  stride?: Pair;
  /** Zero padding per side, or 'valid' (none) or 'same' (output size = input size, stride 1). */
  padding?: Pair | 'valid' | 'same';
  /** Spacing between kernel elements (default 1). */
  dilation?: Pair;
  /** Number of channel groups, each convolved with its own filters; divides the input and output channels (default 1). */
  groups?: number;
}

/** 2-D convolution, as torch.nn.functional.conv2d. */
export function conv2d(x: Tensor, weight: Tensor, bias?: Tensor, opts?: Conv2dOptions): Tensor {
  const options = checkKnownOptions<Conv2dOptions>('conv2d options', opts, ['stride', 'padding', 'dilation', 'groups']);
  const stride = pair('conv2d stride', options.stride ?? 1, 1);
  const dilation = pair('conv2d dilation', options.dilation ?? 1, 1);
  const groups = options.groups ?? 1;
  checkInteger('conv2d groups', groups, 1);
  let padding: [number, number];
  if (options.padding === 'valid') padding = [0, 0];
  else if (options.padding === 'same') {
    if (stride[0] !== 1 || stride[1] !== 1) throw new DTorchError(ErrorCode.InvalidArgument, "conv2d: padding 'same' needs stride 1");
    if (!(weight instanceof Tensor)) throw invalidParameter('conv2d weight', 'Tensor', weight);
    const total = [dilation[0] * (weight.shape[2]! - 1), dilation[1] * (weight.shape[3]! - 1)];
    if (total[0]! % 2 || total[1]! % 2) {
      throw new DTorchError(ErrorCode.InvalidArgument, "conv2d: padding 'same' with an even kernel extent needs uneven padding; pad with F.pad first");
    }
    padding = [total[0]! / 2, total[1]! / 2];
  } else padding = pair('conv2d padding', options.padding ?? 0, 0);
  const inputs = bias === undefined || bias === null ? [x, weight] : [x, weight, bias];
  return record('conv2d', inputs, [...stride, ...padding, ...dilation, groups]);
}

/** Options of {@link interpolate}: exactly one of `size` and `scaleFactor`. */
export interface InterpolateOptions {
  /** Output H and W. */
  size?: Pair;
  /** Multiplier of H and W (one number or [h, w]); the output size is floor(input size * factor). */
  scaleFactor?: number | readonly [number, number];
  /** Sampling: 'nearest' (the default) or 'bilinear'. */
  mode?: 'nearest' | 'bilinear';
  /** Bilinear only: align the corner pixels of input and output, as PyTorch's align_corners (default false). */
  alignCorners?: boolean;
}

/** Resizes the H and W of x [N, C, H, W], as torch.nn.functional.interpolate. */
export function interpolate(x: Tensor, opts: InterpolateOptions): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter('interpolate input', 'Tensor', x);
  if (x.ndim !== 4) throw new DTorchError(ErrorCode.ShapeMismatch, `interpolate: needs an input [N, C, H, W], got ${x.describe()}`);
  const options = checkKnownOptions<InterpolateOptions>('interpolate options', opts, ['size', 'scaleFactor', 'mode', 'alignCorners']);
  const mode = options.mode ?? 'nearest';
  if (options.alignCorners !== undefined) checkBoolean('interpolate alignCorners', options.alignCorners);
  if (mode !== 'nearest' && mode !== 'bilinear') throw invalidParameter('interpolate mode', "'nearest' or 'bilinear'", mode);
  if ((options.size === undefined) === (options.scaleFactor === undefined)) {
    throw new DTorchError(ErrorCode.InvalidArgument, 'interpolate: give exactly one of size and scaleFactor');
  }
  if (options.alignCorners && mode === 'nearest') throw new DTorchError(ErrorCode.InvalidArgument, 'interpolate: alignCorners only applies to bilinear');
  let size: [number, number];
  let scales: [number, number] = [0, 0];
  if (options.size !== undefined) size = pair('interpolate size', options.size, 1);
  else {
    const s = typeof options.scaleFactor === 'number' ? [options.scaleFactor, options.scaleFactor] : options.scaleFactor!;
    const finitePositive = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v > 0;
    if (!Array.isArray(s) || s.length !== 2 || !s.every(finitePositive)) {
      throw invalidParameter('interpolate scaleFactor', 'a finite positive number or a pair of them', options.scaleFactor);
    }
    scales = [s[0]!, s[1]!];
    size = [Math.floor(x.shape[2]! * scales[0]), Math.floor(x.shape[3]! * scales[1])];
    if (!size.every((n) => isInteger(n) && n >= 1)) {
      throw invalidParameter('interpolate scaleFactor', `a factor giving output sizes in [1, 2^53) from [${x.shape[2]}, ${x.shape[3]}]`, options.scaleFactor);
    }
  }
  return record('interpolate', [x], [mode === 'nearest' ? 0 : 1, ...size, ...scales, options.alignCorners ? 1 : 0]);
}

/** Options of {@link avgPool2d} and {@link maxPool2d}. */
export interface PoolOptions {
  /** Step of the window over H and W (default: the kernel size). */
  stride?: Pair;
  /** Implicit padding per side, at most half the kernel (default 0): zeros counted in the average, never picked by the max. */
  padding?: Pair;
}

function pool(op: 'avg_pool2d' | 'max_pool2d', x: Tensor, kernelSize: Pair, opts: PoolOptions | undefined): Tensor {
  const options = checkKnownOptions<PoolOptions>(`${op} options`, opts, ['stride', 'padding']);
  const kernel = pair(`${op} kernelSize`, kernelSize, 1);
  const stride = pair(`${op} stride`, options.stride ?? kernel, 1);
  const padding = pair(`${op} padding`, options.padding ?? 0, 0);
  return record(op, [x], [...kernel, ...stride, ...padding]);
}
/** Averages over `kernelSize` windows of x [N, C, H, W], as torch.nn.functional.avg_pool2d. */
export const avgPool2d = (x: Tensor, kernelSize: Pair, options?: PoolOptions): Tensor => pool('avg_pool2d', x, kernelSize, options);
/** The maximum of each `kernelSize` window of x [N, C, H, W], as torch.nn.functional.max_pool2d. */
export const maxPool2d = (x: Tensor, kernelSize: Pair, options?: PoolOptions): Tensor => pool('max_pool2d', x, kernelSize, options);
