// Normalisation layers: LayerNorm and RMSNorm over the last dims, GroupNorm over channel groups.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger, checkNumber, checkShape } from '@dtorch/common';
import { fullParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';

export interface NormOptions extends LayerOptions {
  eps?: number;
  /** Learnable weight (and bias, for LayerNorm); default true. */
  elementwiseAffine?: boolean;
  /** LayerNorm only: a bias along with the weight; default true. */
  bias?: boolean;
}

function normalizedShapeOf(name: string, shape: number | readonly number[]): number[] {
  return typeof shape === 'number' ? [checkInteger(`${name} normalizedShape`, shape, 1)] : [...checkShape(`${name} normalizedShape`, shape)];
}

export class LayerNorm extends Module {
  readonly normalizedShape: number[];
  readonly eps: number;
  weight: Parameter | undefined;
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

  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.layerNorm(x, this.normalizedShape, { weight: this.weight, bias: this.bias, eps: this.eps });
  }

  override extraRepr(): string {
    return `(${this.normalizedShape.join(', ')},), eps=${this.eps}, elementwise_affine=${this.weight !== undefined}`;
  }
}

export class RMSNorm extends Module {
  readonly normalizedShape: number[];
  /** undefined: the input dtype's machine epsilon, as torch.nn.RMSNorm. */
  readonly eps: number | undefined;
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

  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.rmsNorm(x, this.normalizedShape, { weight: this.weight, ...(this.eps === undefined ? {} : { eps: this.eps }) });
  }

  override extraRepr(): string {
    return `(${this.normalizedShape.join(', ')},), eps=${this.eps ?? 'None'}, elementwise_affine=${this.weight !== undefined}`;
  }
}

export interface GroupNormOptions extends LayerOptions {
  eps?: number;
  /** Learnable per-channel weight and bias; default true. */
  affine?: boolean;
}

export class GroupNorm extends Module {
  readonly numGroups: number;
  readonly numChannels: number;
  readonly eps: number;
  weight: Parameter | undefined;
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

  forward(x: dt.Tensor): dt.Tensor {
    return dt.F.groupNorm(x, this.numGroups, { weight: this.weight, bias: this.bias, eps: this.eps });
  }

  override extraRepr(): string {
    return `${this.numGroups}, ${this.numChannels}, eps=${this.eps}, affine=${this.weight !== undefined}`;
  }
}
