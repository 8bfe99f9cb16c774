// FP8 weights for linears, torchao's row-wise float8 recipe (Float8WeightOnly's layout with
// per-token activations, what FP8 Flux/SD3 deployments run): each output row of W [out, in] gets
// a float32 scale amax(|row|) / 448 and the row divided by it, rounded to float8_e4m3fn with
// saturation. The linear then multiplies with dt.F.fp8Linear (which quantizes its input per
// token). Half the bytes of bfloat16 weights; on Hopper GPUs the FP8 matmul is faster too.
//
// On a mesh the scales lie as the weight's rows do: a weight split on its output rows (colwise)
// has its scales split the same way; one split on its input columns (rowwise) has whole scales
// (the row's amax is taken over every column, as one device would).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { Linear, rowAmax } from '../layers/linear.js';
import type { Module } from '../module.js';
import { Parameter } from '../parameter.js';

const e4m3Max = 448;
const minAmax = 1e-12; // a row of zeros: a finite scale, its values quantize to 0

// the float dtype each quantized linear computes in (its weight's dtype before quantize)
const floatDtypes = new WeakMap<Linear, dt.DType>();

/** The float weight of `linear` (an FP8 one dequantized, in float32; else its own, not a copy). */
export function floatWeight(linear: Linear): dt.Tensor {
  const scale = linear.weight_scale;
  return scale ? dt.tidy(() => linear.weight.to('float32').mul(scale.unsqueeze(1))) : linear.weight;
}

/** The dtype `linear` computes in: its weight's, or for an FP8 weight the float dtype it was quantized from. */
export function linearDtype(linear: Linear): dt.DType {
  return linear.weight_scale ? (linear.bias?.dtype ?? floatDtypes.get(linear) ?? 'bfloat16') : linear.weight.dtype;
}

/** An FP8 weight and its scales, from {@link quantizeWeightFp8}. */
export interface Fp8Weight {
  /** float8_e4m3fn [out, in], placed as the float weight was. */
  readonly weight: dt.Tensor;
  /** float32 [out]: weight · scale ≈ the float weight. */
  readonly scale: dt.Tensor;
}

/** `w` [out, in] (a float dtype) as float8_e4m3fn rows and one float32 scale per row (see the file's comment). */
export function quantizeWeightFp8(w: dt.Tensor): Fp8Weight {
  if (w.ndim !== 2 || !['float32', 'bfloat16', 'float16', 'float64'].includes(w.dtype)) {
    throw new DTorchError(ErrorCode.InvalidArgument, `quantizeWeightFp8: expected a float weight [out, in], got ${w.dtype} [${w.shape.join(', ')}]`);
  }
  return dt.tidy(() => {
    const f = w.to('float32');
    // whole rows' amax: a weight split on its columns (row parallel) takes it over all of them
    const scale = rowAmax([f]).reshape([w.shape[0]!]).clamp(minAmax).div(e4m3Max);
    const weight = f.div(scale.unsqueeze(1)).clamp(-e4m3Max, e4m3Max).to('float8_e4m3fn');
    return { weight, scale };
  });
}

/**
 * Makes `linear` hold its weight in FP8 (float8_e4m3fn and `weight_scale`); its bias and forward
 * stay (the forward then runs dt.F.fp8Linear). A linear that is FP8 already is left as it is.
 */
export function quantizeLinearFp8(linear: Linear): void {
  if (linear.weight_scale) return;
  const { weight, scale } = quantizeWeightFp8(linear.weight);
  floatDtypes.set(linear, linear.weight.dtype);
  linear.setTensor('weight', weight);
  linear.weight_scale = new Parameter(scale);
}

/** Options of {@link quantizeFp8}. */
export interface QuantizeFp8Options {
  /** Which linears to quantize, by module path; default every Linear whose sizes the FP8 matmul takes. */
  filter?: (path: string, linear: Linear) => boolean;
}

/**
 * Quantizes the linears of `model` to FP8 weights (see the file's comment): those `filter` picks
 * whose in and out features are multiples of 16 (what GPUs' FP8 matmuls take). Returns their paths.
 */
export function quantizeFp8(model: Module, options: QuantizeFp8Options = {}): string[] {
  const filter = options.filter ?? (() => true);
  const done: string[] = [];
  for (const [path, m] of model.namedModules()) {
    if (!(m instanceof Linear) || m.weight_scale || m.inFeatures % 16 !== 0 || m.outFeatures % 16 !== 0 || !filter(path, m)) continue;
    quantizeLinearFp8(m);
    done.push(path);
  }
  return done;
}
