// Linear: y = x Wᵀ + b with W [out, in], as torch.nn.Linear. The tensor-parallel linears
// (parallel/linear.ts) are Linears whose parameters lie differently on the mesh.
import * as dt from '@dtorch/api';
import { checkBoolean, checkInteger } from '@dtorch/common';
import { uniformParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';
import { loraLinear } from '../lora/linear_lora.js';

/** Options of Linear and the tensor-parallel linears. */
export interface LinearOptions extends LayerOptions {
  /** Default true. */
  bias?: boolean;
}

/** Placements of a linear's weight and bias on its mesh. */
export interface LinearLayout {
  /** Placements of the weight [out, in], one per mesh dim. */
  weight: dt.Placement[];
  /** Placements of the bias [out], one per mesh dim. */
  bias: dt.Placement[];
}

/**
 * y = x Wᵀ + b, as torch.nn.Linear: `new Linear(inFeatures, outFeatures, options)`. Weight and
 * bias are replicated on every mesh dim and start U(-1/√in, 1/√in).
 */
export class Linear extends Module {
  /** Size of each input's last dim. */
  readonly inFeatures: number;
  /** Size of each output's last dim. */
  readonly outFeatures: number;
  /** [outFeatures, inFeatures] (placements: see the class). */
  weight: Parameter;
  /** [outFeatures], or undefined with `bias: false`. */
  bias: Parameter | undefined;
  /**
   * With an FP8 weight (nn.quantizeFp8, or an FP8 checkpoint): one float32 scale per output row
   * [outFeatures], weight · weight_scale ≈ the float weight. Named as the checkpoints' key.
   */
  weight_scale: Parameter | undefined;

  constructor(inFeatures: number, outFeatures: number, options?: LinearOptions) {
    super();
    const name = this.constructor.name;
    this.inFeatures = checkInteger(`${name} inFeatures`, inFeatures, 1);
    this.outFeatures = checkInteger(`${name} outFeatures`, outFeatures, 1);
    const o = layerOptions<LinearOptions>(name, options);
    const bias = o.bias === undefined ? true : checkBoolean(`${name} bias`, o.bias);
    const layout = this.layout(o.mesh);
    const bound = 1 / Math.sqrt(inFeatures);
    this.weight = uniformParameter([outFeatures, inFeatures], bound, { mesh: o.mesh, placements: layout.weight, dtype: o.dtype });
    this.bias = bias ? uniformParameter([outFeatures], bound, { mesh: o.mesh, placements: layout.bias, dtype: o.dtype }) : undefined;
    this.weight_scale = undefined;
  }

  /** Where the weight and bias lie (called from the constructor; the parallel linears override it). */
  protected layout(mesh: dt.DeviceMesh): LinearLayout {
    return { weight: replicated(mesh), bias: replicated(mesh) };
  }

  /** [..., inFeatures] -> [..., outFeatures]. */
  forward(x: dt.Tensor): dt.Tensor {
    // LoRA adapters (nn.LinearLora) ride here: their product first, the base matmul adding into it
    return loraLinear(this, x) ?? linearProduct(this, x, this.bias);
  }

  override extraRepr(): string {
    const fp8 = this.weight_scale ? `, weight=${this.weight.dtype}` : '';
    return `in_features=${this.inFeatures}, out_features=${this.outFeatures}, bias=${this.bias !== undefined}${fp8}`;
  }
}

/**
 * x · Wᵀ (+ bias) with `weight` (default the linear's own; a slice of its input columns for a
 * linear over concatenated inputs) as `linear` stores it: FP8 with its row scales (dt.F.fp8Linear)
 * when the linear is quantized (`inputAmax`: see dt.F.fp8Linear), else as it is (dt.F.linear).
 */
export function linearProduct(linear: Linear, x: dt.Tensor, bias?: dt.Tensor, weight: dt.Tensor = linear.weight, inputAmax?: dt.Tensor): dt.Tensor {
  const scale = linear.weight_scale;
  return scale ? dt.F.fp8Linear(x, weight, scale, bias, inputAmax) : dt.F.linear(x, weight, bias);
}

/**
 * Each token's largest magnitude over `parts` side by side (float32 [..., 1], whole on every mesh
 * dim that splits their last dim): what an FP8 linear over the concatenated parts, or over
 * columns split between devices, quantizes its input with, so that each piece is quantized as
 * the whole row is on one device.
 */
export function rowAmax(parts: readonly dt.Tensor[]): dt.Tensor {
  return dt.tidy(() => {
    let amax: dt.Tensor | undefined;
    for (const part of parts) {
      const m = lastDimAmax(part.abs()).to('float32');
      amax = amax ? dt.maximum(amax, m) : m;
    }
    return amax!;
  });
}

// max(a, -1, keepdim) of a tensor of magnitudes whose last dim may be split over a mesh dim: split
// evenly over one dim, as [..., n, width / n] (each rank's own row of n), whose n maxima per token
// are gathered (n numbers a token) and reduced; otherwise the last dim gathered first.
function lastDimAmax(a: dt.Tensor): dt.Tensor {
  const last = a.ndim - 1;
  const split = a.placements.flatMap((p, d) => (p.isShard(last) ? [d] : []));
  if (split.length === 0) return a.max(-1, true).values;
  const n = a.mesh.shape[split[0]!]!;
  const width = a.shape[last]!;
  if (split.length === 1 && width % n === 0) {
    const perRank = a.reshape([...a.shape.slice(0, last), n, width / n]).max(-1).values;
    return perRank.redistribute(perRank.placements.map((p) => (p.isShard(last) ? dt.Replicate() : p))).max(-1, true).values;
  }
  return a.redistribute(a.placements.map((p) => (p.isShard(last) ? dt.Replicate() : p))).max(-1, true).values;
}
