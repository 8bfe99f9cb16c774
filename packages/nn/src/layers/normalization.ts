// Normalisation layers: LayerNorm and RMSNorm over the last dims, GroupNorm over channel groups.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger, checkNumber, checkShape } from '@dtorch/common';
import { fullParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';

/** Options of LayerNorm and RMSNorm (RMSNorm takes no `bias`). */
export interface NormOptions extends LayerOptions {
  /** Added to the variance (mean square for RMSNorm). Default 1e-5; RMSNorm: the input dtype's machine epsilon. */
  eps?: number;
  /** Learnable weight (and bias, for LayerNorm); default true. */
  elementwiseAffine?: boolean;
  /** LayerNorm only: a bias along with the weight; default true. */
  bias?: boolean;
}

function normalizedShapeOf(name: string, shape: number | readonly number[]): number[] {
  return typeof shape === 'number' ? [checkInteger(`${name} normalizedShape`, shape, 1)] : [...checkShape(`${name} normalizedShape`, shape)];
}

/**
 * Layer normalisation over the last dims, as torch.nn.LayerNorm: `new LayerNorm(normalizedShape,
 * options)`. Weight (ones) and bias (zeros) are replicated on every mesh dim.
 */
export class LayerNorm extends Module {
  /** The trailing dims normalised over (a number n means [n]). */
  readonly normalizedShape: number[];
  /** Added to the variance; default 1e-5. */
  readonly eps: number;
  /** [...normalizedShape], starting at ones; undefined with `elementwiseAffine: false`. */
  weight: Parameter | undefined;
  /** [...normalizedShape], starting at zeros; undefined with `elementwiseAffine: false` or `bias: false`. */
  bias: Parameter | undefined;

  constructor(normalizedShape: number | readonly number[], options?: NormOptions) {
    super();
    const o = layerOptions<NormOptions>('LayerNorm', options);
    this.normalizedShape = normalizedShapeOf('LayerNorm', normalizedShape);
    this.eps = checkNumber('LayerNorm eps', o.eps ?? 1e-5);
    const affine = checkBoolean('LayerNorm elementwiseAffine', o.elementwiseAffine ?? true);
    const layout = { mesh: o.mesh, placements: replicated(o.mesh), dtype: o.dtype };
    this.weight = affine ? fullParameter(this.normalizedShape, 1, layout) : undefined;
    this.bias = affine && checkBoolean('LayerNorm bias', o.bias ?? true) ? fullParameter(this.normalizedShape, 0, layout) : undefined;
  }

  /** x [..., ...normalizedShape] normalised over those dims, the same shape. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.layerNorm(x, this.normalizedShape, { weight: this.weight, bias: this.bias, eps: this.eps });
  }

  override extraRepr(): string {
    return `(${this.normalizedShape.join(', ')},), eps=${this.eps}, elementwise_affine=${this.weight !== undefined}`;
  }
}

/**
 * RMS normalisation over the last dims, as torch.nn.RMSNorm: `new RMSNorm(normalizedShape,
 * options)`. The weight (ones) is replicated on every mesh dim; there is no bias.
 */
export class RMSNorm extends Module {
  /** The trailing dims normalised over (a number n means [n]). */
  readonly normalizedShape: number[];
  /** undefined: the input dtype's machine epsilon, as torch.nn.RMSNorm. */
  readonly eps: number | undefined;
  /** [...normalizedShape], starting at ones; undefined with `elementwiseAffine: false`. */
  weight: Parameter | undefined;

  constructor(normalizedShape: number | readonly number[], options?: Omit<NormOptions, 'bias'>) {
    super();
    const o = layerOptions<NormOptions>('RMSNorm', options);
    if (o.bias !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, 'RMSNorm takes no bias option; it has a weight only');
    this.normalizedShape = normalizedShapeOf('RMSNorm', normalizedShape);
    this.eps = o.eps === undefined ? undefined : checkNumber('RMSNorm eps', o.eps);
    const affine = checkBoolean('RMSNorm elementwiseAffine', o.elementwiseAffine ?? true);
    this.weight = affine ? fullParameter(this.normalizedShape, 1, { mesh: o.mesh, placements: replicated(o.mesh), dtype: o.dtype }) : undefined;
  }

  /** x [..., ...normalizedShape] divided by its root mean square over those dims, the same shape. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.rmsNorm(x, this.normalizedShape, { weight: this.weight, ...(this.eps === undefined ? {} : { eps: this.eps }) });
  }

  override extraRepr(): string {
    return `(${this.normalizedShape.join(', ')},), eps=${this.eps ?? 'None'}, elementwise_affine=${this.weight !== undefined}`;
  }
}

/** Options of GroupNorm. */
export interface GroupNormOptions extends LayerOptions {
  /** Added to the variance; default 1e-5. */
  eps?: number;
  /** Learnable per-channel weight and bias; default true. */
  affine?: boolean;
}

/**
 * Group normalisation, as torch.nn.GroupNorm: `new GroupNorm(numGroups, numChannels, options)`
 * normalises x [N, C, ...] over each group of C / numGroups channels (and all later dims).
 * Weight (ones) and bias (zeros) are replicated on every mesh dim.
 */
export class GroupNorm extends Module {
  /** Groups the channels are split into; divides numChannels. */
  readonly numGroups: number;
  /** C, the size of the input's dim 1. */
  readonly numChannels: number;
  /** Added to the variance; default 1e-5. */
  readonly eps: number;
  /** [numChannels], starting at ones; undefined with `affine: false`. */
  weight: Parameter | undefined;
  /** [numChannels], starting at zeros; undefined with `affine: false`. */
  bias: Parameter | undefined;

  constructor(numGroups: number, numChannels: number, options?: GroupNormOptions) {
    super();
    const o = layerOptions<GroupNormOptions>('GroupNorm', options);
    this.numGroups = checkInteger('GroupNorm numGroups', numGroups, 1);
    this.numChannels = checkInteger('GroupNorm numChannels', numChannels, 1);
    if (numChannels % numGroups !== 0) {
      throw new DTorchError(ErrorCode.InvalidArgument, `GroupNorm: numChannels ${numChannels} is not divisible by numGroups ${numGroups}`);
    }
    this.eps = checkNumber('GroupNorm eps', o.eps ?? 1e-5);
    const affine = checkBoolean('GroupNorm affine', o.affine ?? true);
    const layout = { mesh: o.mesh, placements: replicated(o.mesh), dtype: o.dtype };
    this.weight = affine ? fullParameter([numChannels], 1, layout) : undefined;
    this.bias = affine ? fullParameter([numChannels], 0, layout) : undefined;
  }

  /** x [N, numChannels, ...] normalised per group, the same shape. */
  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.groupNorm(x, this.numGroups, { weight: this.weight, bias: this.bias, eps: this.eps });
  }

  override extraRepr(): string {
    return `${this.numGroups}, ${this.numChannels}, eps=${this.eps}, affine=${this.weight !== undefined}`;
  }
}
