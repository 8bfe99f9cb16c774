// Conv2d: 2-D convolution with a [out, in / groups, kH, kW] weight, as torch.nn.Conv2d.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger } from '@dtorch/common';
import { uniformParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';

type Pair = number | readonly [number, number];

export interface Conv2dOptions extends LayerOptions {
  stride?: Pair;
  padding?: Pair | 'valid' | 'same';
  dilation?: Pair;
  groups?: number;
  /** Default true. */
  bias?: boolean;
}

const pairOf = (name: string, v: Pair): [number, number] => {
  const [a, b] = typeof v === 'number' ? [v, v] : v;
  return [checkInteger(name, a, 1), checkInteger(name, b, 1)];
};

export class Conv2d extends Module {
  readonly inChannels: number;
  readonly outChannels: number;
  readonly kernelSize: [number, number];
  readonly conv: dt.F.Conv2dOptions;
  weight: Parameter;
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

  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.conv2d(x, this.weight, this.bias, this.conv);
  }

  override extraRepr(): string {
    const { stride, padding, groups } = this.conv;
    return `${this.inChannels}, ${this.outChannels}, kernel_size=(${this.kernelSize.join(', ')}), stride=${JSON.stringify(stride)}, padding=${JSON.stringify(padding)}${groups !== 1 ? `, groups=${groups}` : ''}, bias=${this.bias !== undefined}`;
  }
}
