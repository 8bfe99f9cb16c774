// Conv2d: 2-D convolution with a [out, in / groups, kH, kW] weight, as torch.nn.Conv2d.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger } from '@dtorch/common';
import { uniformParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';

/** A size for the height and width dims: one number for both, or [h, w]. */
export type Pair = number | readonly [number, number];

/** Options of Conv2d (those of torch.nn.Conv2d that it supports). */
export interface Conv2dOptions extends LayerOptions {
  /** Step of the kernel over the input; default 1. */
  stride?: Pair;
  /** Zero padding per side, or 'valid' (none) or 'same' (output size = input size, stride 1 only); default 0. */
  padding?: Pair | 'valid' | 'same';
  /** Spacing between kernel elements; default 1. */
  dilation?: Pair;
  /** Channel groups; divides inChannels and outChannels; default 1. */
  groups?: number;
  /** Default true. */
  bias?: boolean;
}

const pairOf = (name: string, v: Pair): [number, number] => {
  const [a, b] = typeof v === 'number' ? [v, v] : v;
  return [checkInteger(name, a, 1), checkInteger(name, b, 1)];
};

/**
 * 2-D convolution, as torch.nn.Conv2d: `new Conv2d(inChannels, outChannels, kernelSize,
 * options)`. Weight and bias are replicated on every mesh dim and start U(-1/√fanIn, 1/√fanIn),
 * fanIn = inChannels / groups · kH · kW.
 */
export class Conv2d extends Module {
  /** C_in, the input's channels (dim 1). */
  readonly inChannels: number;
  /** C_out, the output's channels. */
  readonly outChannels: number;
  /** [kH, kW]. */
  readonly kernelSize: [number, number];
  /** The stride, padding, dilation and groups passed to dt.F.conv2d (defaults filled in). */
  readonly conv: dt.F.Conv2dOptions;
  /** [outChannels, inChannels / groups, kH, kW]. */
  weight: Parameter;
  /** [outChannels], or undefined with `bias: false`. */
  bias: Parameter | undefined;

  constructor(inChannels: number, outChannels: number, kernelSize: Pair, options?: Conv2dOptions) {
    super();
    this.inChannels = checkInteger('Conv2d inChannels', inChannels, 1);
    this.outChannels = checkInteger('Conv2d outChannels', outChannels, 1);
    this.kernelSize = pairOf('Conv2d kernelSize', kernelSize);
    const o = layerOptions<Conv2dOptions>('Conv2d', options);
    const groups = checkInteger('Conv2d groups', o.groups ?? 1, 1);
    if (inChannels % groups !== 0 || outChannels % groups !== 0) {
      throw new DTorchError(ErrorCode.InvalidArgument, `Conv2d: inChannels ${inChannels} and outChannels ${outChannels} must both be divisible by groups ${groups}`);
    }
    this.conv = { stride: o.stride ?? 1, padding: o.padding ?? 0, dilation: o.dilation ?? 1, groups };
    const fanIn = (inChannels / groups) * this.kernelSize[0] * this.kernelSize[1];
    const layout = { mesh: o.mesh, placements: replicated(o.mesh), dtype: o.dtype };
    this.weight = uniformParameter([outChannels, inChannels / groups, ...this.kernelSize], 1 / Math.sqrt(fanIn), layout);
    this.bias = checkBoolean('Conv2d bias', o.bias ?? true) ? uniformParameter([outChannels], 1 / Math.sqrt(fanIn), layout) : undefined;
  }

  /** x [N, inChannels, H, W] -> [N, outChannels, H_out, W_out]. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.conv2d(x, this.weight, this.bias, this.conv);
  }

  override extraRepr(): string {
    const { stride, padding, groups } = this.conv;
    return `${this.inChannels}, ${this.outChannels}, kernel_size=(${this.kernelSize.join(', ')}), stride=${JSON.stringify(stride)}, padding=${JSON.stringify(padding)}${groups !== 1 ? `, groups=${groups}` : ''}, bias=${this.bias !== undefined}`;
  }
}
