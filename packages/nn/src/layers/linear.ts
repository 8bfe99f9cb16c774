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
  }

  /** Where the weight and bias lie (called from the constructor; the parallel linears override it). */
  protected layout(mesh: dt.DeviceMesh): LinearLayout {
    return { weight: replicated(mesh), bias: replicated(mesh) };
  }

  /** [..., inFeatures] -> [..., outFeatures]. */
  forward(x: dt.Tensor): dt.Tensor {
    // LoRA adapters (nn.LinearLora) ride here: their product first, the base matmul adding into it
    return loraLinear(this, x) ?? dt.F.linear(x, this.weight, this.bias);
  }

  override extraRepr(): string {
    return `in_features=${this.inFeatures}, out_features=${this.outFeatures}, bias=${this.bias !== undefined}`;
  }
}
