// Neural-network ops of dt.functional: linear, normalisations, embedding, attention, rotary
// embeddings (as diffusers applies them).
import { DTorchError, ErrorCode, checkBoolean, checkFinite, checkInteger, checkKnownOptions, checkShape, invalidParameter } from '@dtorch/common';
import { checkTensor, recordOp } from '../record.js';
import { Replicate, Shard, formatPlacements, type Placement } from '../placement.js';
import { atomic } from '../scope.js';
import { Tensor } from '../tensor.js';
import type { DType } from '../dtype.js';
import { cat, reshape, stack, unbind } from './shape.js';
import { mul } from './elementwise.js';

function checkOptionalTensor(name: string, x: unknown): Tensor | undefined {
  if (x === undefined || x === null) return undefined;
  return checkTensor(name, x);
}

/** y = x Wᵀ + b, with W of shape [out, in]. */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor): Tensor {
  const inputs = [checkTensor('linear x', x), checkTensor('linear weight', weight)];
  const b = checkOptionalTensor('linear bias', bias);
  if (b) inputs.push(b);
  return recordOp('linear', inputs, []);
}

/**
 * x · (weight · weightScale)ᵀ + bias with an FP8 weight (float8_e4m3fn or float8_e5m2, [out, in])
 * and one float32 scale per output row ([out]), as torchao's row-wise float8 linear: x is quantized
 * per token to float8_e4m3fn (scale amax / 448), the 8-bit operands multiplied with float32
 * accumulation (cuBLASLt's FP8 matmul on GPUs that have it), the output in x's dtype. Elsewhere
 * the same quantized values are multiplied in float32. x must be float32, bfloat16 or float16 and
 * not a partial sum; the bias of x's dtype. `inputAmax` (float32 [..., 1]), each token's largest
 * magnitude over a wider row than x (x one part of a concatenated input, or its columns split over
 * devices), makes x quantize as that whole row would.
 */
export function fp8Linear(x: Tensor, weight: Tensor, weightScale: Tensor, bias?: Tensor, inputAmax?: Tensor): Tensor {
  const inputs = [checkTensor('fp8Linear x', x), checkTensor('fp8Linear weight', weight), checkTensor('fp8Linear weightScale', weightScale)];
  const b = checkOptionalTensor('fp8Linear bias', bias);
  const amax = checkOptionalTensor('fp8Linear inputAmax', inputAmax);
  if (b) inputs.push(b);
  if (amax) inputs.push(amax);
  return recordOp('fp8_linear', inputs, [b ? 1 : 0, amax ? 1 : 0]);
}

/** Options of {@link layerNorm} and {@link groupNorm}: an optional affine weight and bias, and eps. */
export interface NormOptions {
  /** Scale applied after normalising: of `normalizedShape` for layerNorm, one per channel [C] for groupNorm. */
  weight?: Tensor;
  /** Shift added after the weight, of the weight's shape. */
  bias?: Tensor;
  /** Added to the variance for numerical stability (default 1e-5; finite, >= 0). */
  eps?: number;
}

const NORM_OPTIONS = ['weight', 'bias', 'eps'] as const;

function norm(op: 'layer_norm' | 'rms_norm', x: Tensor, normalizedShape: number | readonly number[], options: NormOptions, eps: number): Tensor {
  checkTensor(`${op} input`, x);
  const shape = checkShape(`${op} normalizedShape`, typeof normalizedShape === 'number' ? [normalizedShape] : normalizedShape);
  const weight = checkOptionalTensor(`${op} weight`, options.weight);
  const bias = checkOptionalTensor(`${op} bias`, options.bias);
  // a negative or infinite eps gives NaN or zeros everywhere (PyTorch computes them): refused
  checkFinite(`${op} eps`, eps, 0);
  const inputs = [x, ...(weight ? [weight] : []), ...(bias ? [bias] : [])];
  return recordOp(op, inputs, [shape.length, ...shape, weight ? 1 : 0, bias ? 1 : 0, eps]);
}

/** Layer normalisation over the last dims (`normalizedShape`), affine when weight/bias are given. */
export function layerNorm(x: Tensor, normalizedShape: number | readonly number[], options?: NormOptions): Tensor {
  const o = checkKnownOptions<NormOptions>('layerNorm options', options, NORM_OPTIONS);
  return norm('layer_norm', x, normalizedShape, o, o.eps ?? 1e-5);
}

// torch.finfo(dtype).eps: the default eps of rms_norm
const machineEps: Partial<Record<DType, number>> = { float32: 1.1920928955078125e-7, float64: 2.220446049250313e-16, float16: 0.0009765625, bfloat16: 0.0078125 };

/** RMS normalisation over the last dims, as torch.nn.functional.rms_norm (default eps: the dtype's). */
export function rmsNorm(x: Tensor, normalizedShape: number | readonly number[], options?: { weight?: Tensor; eps?: number }): Tensor {
  const o = checkKnownOptions<NormOptions>('rmsNorm options', options, NORM_OPTIONS);
  if (o.bias !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, 'rmsNorm takes no bias');
  return norm('rms_norm', x, normalizedShape, { weight: o.weight }, o.eps ?? machineEps[checkTensor('rmsNorm input', x).dtype] ?? 1e-6);
}

/** Group normalisation of x [N, C, ...] in `numGroups` groups of channels. */
export function groupNorm(x: Tensor, numGroups: number, options?: NormOptions): Tensor {
  checkTensor('groupNorm input', x);
  options = checkKnownOptions<NormOptions>('groupNorm options', options, NORM_OPTIONS);
  checkInteger('groupNorm numGroups', numGroups, 1);
  const weight = checkOptionalTensor('groupNorm weight', options.weight);
  const bias = checkOptionalTensor('groupNorm bias', options.bias);
  const eps = options.eps ?? 1e-5;
  checkFinite('groupNorm eps', eps, 0);
  const inputs = [x, ...(weight ? [weight] : []), ...(bias ? [bias] : [])];
  return recordOp('group_norm', inputs, [numGroups, weight ? 1 : 0, bias ? 1 : 0, eps]);
}

/** Rows of `weight` [numEmbeddings, dim] picked by integer `ids`. */
export function embedding(ids: Tensor, weight: Tensor): Tensor {
  return recordOp('embedding', [checkTensor('embedding ids', ids), checkTensor('embedding weight', weight)], []);
}

/** Options of {@link scaledDotProductAttention}, as torch's attn_mask, is_causal and scale. */
export interface AttentionOptions {
  /** Bool (true = attend) or additive float mask, broadcast to [..., L, S]. */
  attnMask?: Tensor;
  /** Each query attends only to keys at or before its position (a lower-triangular mask); default false. */
  isCausal?: boolean;
  /** Default 1 / sqrt(E). */
  scale?: number;
  /**
   * Heads packed side by side in the last dim, as a projection makes them: q [..., L, heads·E],
   * k [..., S, heads·E], v [..., S, heads·Ev] and the result [..., L, heads·Ev]; a mask then
   * broadcasts to [..., heads, L, S]. The same as unflattening to [..., heads, L, E] around the
   * call and flattening back, recorded as one op instead of seven.
   */
  heads?: number;
}

/**
 * softmax(q kᵀ · scale + mask) v, as torch.nn.functional.scaled_dot_product_attention.
 * Context parallel: on a mesh with dims named 'ulysses' and/or 'ring', q, k and v sharded on
 * the sequence dim (-2) along them run Ulysses (all-to-all sequence -> heads, attention,
 * all-to-all back) and/or ring attention (key/value blocks passed around the ring, merged by
 * log-sum-exp); on a 2-D mesh put 'ring' before 'ulysses' so that each keeps a contiguous
 * sequence block.
 */
export function scaledDotProductAttention(q: Tensor, k: Tensor, v: Tensor, opts?: AttentionOptions): Tensor {
  const options = checkKnownOptions<AttentionOptions>('sdpa options', opts, ['attnMask', 'isCausal', 'scale', 'heads']);
  checkOptionalTensor('sdpa attnMask', options.attnMask);
  if (options.isCausal !== undefined) checkBoolean('sdpa isCausal', options.isCausal);
  if (options.scale !== undefined) checkFinite('sdpa scale', options.scale);
  checkTensor('sdpa q', q);
  if (options.heads !== undefined) return packedHeadsAttention(q, checkTensor('sdpa k', k), checkTensor('sdpa v', v), options, checkInteger('sdpa heads', options.heads, 1));
  const parallel = contextParallelDims(q);
  if (parallel) return atomic(() => contextParallelAttention(q, checkTensor('sdpa k', k), checkTensor('sdpa v', v), options, parallel));
  return attention(q, k, v, options);
}

function attention(q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions): Tensor {
  const inputs = [checkTensor('sdpa q', q), checkTensor('sdpa k', k), checkTensor('sdpa v', v)];
  const mask = checkOptionalTensor('sdpa attnMask', options.attnMask);
  if (mask) inputs.push(mask);
  return recordOp('sdpa', inputs, [mask ? 1 : 0, ...causalAndScale(options)]);
}

// isCausal, hasScale, scale: the attributes every attention op ends with
const causalAndScale = (o: AttentionOptions) => [o.isCausal ? 1 : 0, o.scale === undefined ? 0 : 1, o.scale ?? 0] as const;

// Attention over heads packed in the last dim: the engine's sdpa_heads, unless an input is split
// on that dim (a split need not fall between heads) or sequence-parallel, where the heads are
// unpacked around sdpa, whose rows and Ulysses/ring paths take [..., heads, L, E].
function packedHeadsAttention(q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions, heads: number): Tensor {
  for (const [name, t] of [['q', q], ['k', k], ['v', v]] as const) {
    if (t.ndim < 2 || t.shape.at(-1)! % heads !== 0) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `sdpa: with heads ${heads}, ${name} ${t.describe()} must be [..., L, heads·E]; its last dim is not a multiple of ${heads}`);
    }
  }
  const unpacked: AttentionOptions = { ...options, heads: undefined };
  const splitLast = [q, k, v].some((t) => t.placements.some((p) => p.isShard(t.ndim - 1)));
  if (splitLast || contextParallelDims(q)) {
    return atomic(() => {
      const qkv = [q, k, v];
      const whole = qkv.map((t) => betweenHeads(t, heads));
      const views = whole.map((t) => t.unflatten(-1, [-1, t.shape.at(-1)! / heads])); // -1: the heads here
      const split = views.map((t) => t.transpose(-3, -2));
      const out = scaledDotProductAttention(split[0]!, split[1]!, split[2]!, unpacked);
      const tokens = out.transpose(-3, -2);
      const joined = tokens.flatten(-2);
      for (const t of [...whole.filter((t, i) => t !== qkv[i]), ...views, ...split, out, tokens]) t.dispose();
      return joined;
    });
  }
  const inputs = [q, k, v];
  const mask = checkOptionalTensor('sdpa attnMask', options.attnMask);
  if (mask) inputs.push(mask);
  return recordOp('sdpa_heads', inputs, [heads, mask ? 1 : 0, ...causalAndScale(options)]);
}

// `t` split on its last dim only where the splits fall between heads: mesh dims whose split
// would cut through a head (the heads not divisible by the devices splitting them) are gathered.
function betweenHeads(t: Tensor, heads: number): Tensor {
  const last = t.ndim - 1;
  const devices = t.placements.reduce((n, p, d) => (p.isShard(last) ? n * t.mesh.shape[d]! : n), 1);
  if (heads % devices === 0) return t;
  return t.redistribute(t.placements.map((p) => (p.isShard(last) ? Replicate() : p)));
}

interface ParallelDims {
  ulysses: number; // mesh dim, or -1
  ring: number;
}

// The mesh dims named 'ulysses' / 'ring' along which q is sharded on its sequence dim.
function contextParallelDims(q: Tensor): ParallelDims | undefined {
  const names = q.mesh.dimNames ?? [];
  const seq = q.ndim - 2;
  const along = (name: string) => {
    const d = names.indexOf(name);
    return d >= 0 && seq >= 0 && q.placements[d]!.isShard(seq) ? d : -1;
  };
  const dims = { ulysses: along('ulysses'), ring: along('ring') };
  return dims.ulysses >= 0 || dims.ring >= 0 ? dims : undefined;
}

function withPlacement(t: Tensor, meshDim: number, p: Placement): Tensor {
  return t.redistribute(t.placements.map((q, d) => (d === meshDim ? p : q)));
}

function contextParallelAttention(q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions, dims: ParallelDims): Tensor {
  const seq = q.ndim - 2;
  const heads = q.ndim - 3;
  if (heads < 0) throw new DTorchError(ErrorCode.ShapeMismatch, `sdpa: Ulysses/ring attention needs q [..., H, S, E], got ${q.describe()}`);
  for (const t of [k, v]) {
    if (t.placements.map(String).join() !== q.placements.map(String).join()) {
      throw new DTorchError(ErrorCode.PlacementMismatch, `sdpa: context parallel attention needs q, k and v placed alike; got q ${dt(q)}, k ${dt(k)}, v ${dt(v)}`);
    }
  }
  const temporaries: Tensor[] = [];
  let [qq, kk, vv] = [q, k, v];
  if (dims.ulysses >= 0) {
    // all-to-all: each rank trades its sequence block for a block of heads
    [qq, kk, vv] = [qq, kk, vv].map((t) => withPlacement(t, dims.ulysses, Shard(heads))) as [Tensor, Tensor, Tensor];
    temporaries.push(qq, kk, vv);
  }
  let out: Tensor;
  if (dims.ring >= 0) {
    if (options.attnMask) {
      throw new DTorchError(ErrorCode.InvalidArgument, 'sdpa: ring attention takes isCausal but not attnMask; use Ulysses alone for masks');
    }
    out = recordOp('ring_attention', [qq, kk, vv], [dims.ring, ...causalAndScale(options)]);
  } else {
    out = attention(qq, kk, vv, options);
  }
  if (dims.ulysses >= 0) {
    temporaries.push(out);
    out = withPlacement(out, dims.ulysses, Shard(seq)); // and back: heads for the sequence block
  }
  for (const t of temporaries) t.dispose();
  return out;
}

const dt = (t: Tensor) => formatPlacements(t.placements);

/** Options of {@link applyRotaryEmb}, as diffusers' apply_rotary_emb's. */
export interface RotaryOptions {
  /** -1 pairs neighbours of the last dim (Flux, CogVideoX; the default), -2 its two halves (Stable Audio, CogView4). */
  useRealUnbindDim?: -1 | -2;
  /** x's token dim (diffusers' `sequence_dim`): 2 for [B, H, S, D] (the default: x's second-to-last), 1 for [B, S, H, D]. */
  sequenceDim?: number;
}

/**
 * Rotary position embeddings as diffusers' apply_rotary_emb (use_real=True): x [B, H, S, D]
 * (or [B, S, H, D] with `sequenceDim` 1), freqs (cos, sin) each [S, D]; pairs of the last dim
 * rotate. `useRealUnbindDim` -1 pairs neighbours (Flux, CogVideoX), -2 pairs the two halves
 * (Stable Audio, CogView4). An RMS norm's output rotated at once (per-head q/k norms, then the
 * rotary) runs as one kernel on GPUs (the controller's fusion, `rms_norm_rotary_emb`).
 */
export function applyRotaryEmb(x: Tensor, freqs: readonly [Tensor, Tensor], options?: RotaryOptions): Tensor {
  checkTensor('applyRotaryEmb x', x);
  if (!Array.isArray(freqs) || freqs.length !== 2) throw invalidParameter('applyRotaryEmb freqs', '[cos, sin] tensors', freqs);
  const [cos, sin] = [checkTensor('applyRotaryEmb cos', freqs[0]), checkTensor('applyRotaryEmb sin', freqs[1])];
  const o = checkKnownOptions<RotaryOptions>('applyRotaryEmb options', options, ['useRealUnbindDim', 'sequenceDim']);
  const unbindDim = o.useRealUnbindDim ?? -1;
  if (unbindDim !== -1 && unbindDim !== -2) throw invalidParameter('applyRotaryEmb useRealUnbindDim', '-1 or -2', unbindDim);
  if (x.ndim < 2 || x.shape.at(-1)! % 2 !== 0) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `applyRotaryEmb: x ${x.describe()} must be [..., S, ..., D] with its last dim even`);
  }
  // the token dim: any dim before the last (negative counts from the end)
  const given = checkInteger('applyRotaryEmb sequenceDim', o.sequenceDim ?? x.ndim - 2, -x.ndim, x.ndim - 2);
  const sequenceDim = given < 0 ? given + x.ndim : given;
  if (sequenceDim === x.ndim - 1) throw invalidParameter('applyRotaryEmb sequenceDim', `a dim of x before its last (0 to ${x.ndim - 2})`, given);
  for (const t of [cos, sin]) {
    if (t.ndim === 2 && (t.shape[0] !== x.shape[sequenceDim] || t.shape[1] !== x.shape.at(-1))) {
      throw new DTorchError(
        ErrorCode.ShapeMismatch,
        `applyRotaryEmb: cos and sin must be [S, D] = [${x.shape[sequenceDim]}, ${x.shape.at(-1)}] for x ${x.describe()} (S: its dim ${sequenceDim}, sequenceDim), got ${t.describe()}`,
      );
    }
  }
  if (rotaryOpServes(x, cos, sin, sequenceDim)) return recordOp('rotary_emb', [x, cos, sin], [unbindDim === -2 ? 1 : 0, x.ndim - sequenceDim]);
  return atomic(() => rotate(x, cos, sin, unbindDim, sequenceDim));
}

// Whether the engine's rotary_emb op takes these inputs (one pass on GPUs; the very ops of
// rotate() elsewhere): tables [S, D] on x's mesh, whole, or split by tokens as x is (whole
// tables are sliced locally there). Other layouts (tables of more dims, x split on D) go the
// composite way, whose broadcasts cover them.
function rotaryOpServes(x: Tensor, cos: Tensor, sin: Tensor, sequenceDim: number): boolean {
  const [s, d] = [x.shape[sequenceDim], x.shape.at(-1)];
  if ([cos, sin].some((t) => t.ndim !== 2 || t.shape[0] !== s || t.shape[1] !== d || !t.mesh.equals(x.mesh))) return false;
  return x.placements.every((p, m) => {
    const whole = cos.placements[m]!.isReplicate() && sin.placements[m]!.isReplicate();
    if (p.isShard(sequenceDim)) return whole || (cos.placements[m]!.isShard(0) && sin.placements[m]!.isShard(0));
    return whole && (p.isReplicate() || (p.isShard() && p.dim < x.ndim - 1));
  });
}

function rotate(x: Tensor, cosTable: Tensor, sinTable: Tensor, unbindDim: -1 | -2, sequenceDim: number): Tensor {
  const lead = x.shape.slice(0, -1);
  const d = x.shape.at(-1)!;
  const pieces: Tensor[] = [];
  const keep = (t: Tensor) => (pieces.push(t), t);
  // [S, D] tables over the dims between the tokens and the last as ones (diffusers' sequence_dim=1: [S, 1, D])
  const between = x.ndim - 2 - sequenceDim;
  const broadcast = (t: Tensor) => (between > 0 && t.ndim === 2 ? keep(reshape(t, [t.shape[0]!, ...Array<number>(between).fill(1), t.shape[1]!])) : t);
  const [cos, sin] = [broadcast(cosTable), broadcast(sinTable)];
  let rotated: Tensor;
  if (unbindDim === -1) {
    const [re, im] = unbind(keep(reshape(x, [...lead, d / 2, 2])), -1) as [Tensor, Tensor];
    keep(re);
    keep(im);
    rotated = reshape(keep(stack([keep(im.neg()), re], -1)), [...lead, d]);
  } else {
    const [re, im] = unbind(keep(reshape(x, [...lead, 2, d / 2])), -2) as [Tensor, Tensor];
    keep(re);
    keep(im);
    rotated = cat([keep(im.neg()), re], -1);
  }
  keep(rotated);
  const xf = keep(x.to('float32'));
  const out = keep(mul(xf, cos)).add(keep(mul(keep(rotated.to('float32')), sin)));
  const result = out.dtype === x.dtype ? out : out.to(x.dtype);
  for (const t of pieces) if (t !== result) t.dispose();
  if (result !== out) out.dispose();
  return result;
}
