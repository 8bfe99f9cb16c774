// The LoRA adapters of one Linear, as PEFT's LoraLayer: y = W x + b + Σ scale_i · B_i A_i x over
// the active adapters, scale_i = weight_i · alpha_i / rank_i. The linear stays the model's
// module (its keys, loading and parallel form are unchanged); the adapters ride on it as a
// forward hook, so every linear class (plain or tensor-parallel) gets them, and the code that
// multiplies a linear's weight itself (packed q/k/v projections, a linear over concatenated
// inputs) asks for the delta with loraDelta().
//
// On a mesh, A [rank, in] and B [out, rank] lie as the base weight [out, in] does: a weight split
// on its output rows (colwise) has B split by rows and A whole; one split on its input columns
// (rowwise) has A split by columns and B whole, and the rank-r partial sums A x are reduced (r
// numbers a token, not the output's width). Other mesh dims (tokens, batch) need nothing.
//
// Tensors are values here and a compiled call or a captured graph is dropped when a tensor it
// read is released: every change (an adapter added, removed, weighted, enabled, fused) gives the
// base weight a new handle on the same storage, so whatever read this linear before the change
// is traced again, and nothing else is.
//
// Each active adapter keeps B times its scale (weight · alpha / rank), made when the weights are
// set: the product needs no multiply per call (one kernel fewer per linear and step).
//
// Run time: the base matmul runs as without adapters (its kernel, its bias epilogue), then each
// adapter's B h (h = A x) accumulates into its output in place (linear_add), 2 × out numbers a
// token beyond the base. (Writing the delta first and letting the base accumulate into it moves
// the base to other cuBLAS kernels; on an H100 the step was no faster that way: bench/results/hf-lora.)
// A linear that widens its output (in < out: an MLP's first linear, the adaLN modulations) costs
// less laid wide (layout()):
// the weight becomes the first `in` columns of a buffer [W | B₁ … Bₖ], and one matmul of [x | A x]
// with it gives W x + B A x + b in one pass over the output (2 × in more a token, for the join),
// with the matmul's epilogue (a GELU after it) as without adapters.
// A linear that does not widen (in ≥ out: an attention's output, an MLP's last linear, Flux's
// proj_out) is laid tall instead: its weight the first `out` rows of a buffer [W; A₁ … Aₖ] (and its
// bias the first `out` of [b; 0]), so the base matmul gives [W x + b | A x] and reads x once (A x
// on its own reads x again: the largest part of the adapters' cost at Flux's sizes, where x is up
// to 15,360 wide); then B (A x) accumulates into the first `out` columns where they lie (linear_add
// on rows of a wider buffer). DTORCH_LORA_TALL=0 runs them base first, as above.
//
// Linears that read the input of such a linear too (Flux's single blocks: the packed q/k/v and
// proj_mlp both read the normed tokens) can share its join (shareLoraJoin): the linear is laid
// [W | 0 | B…] and its A stacked under theirs, so one [x | A' x | A x] feeds both matmuls (theirs
// reads its first columns where they lie): x is read once for every adapter, and the norm before
// it writes its rows into the join (the controller's layer_norm_modulate_join forms only where
// nothing else reads them). The zero block costs their rank in multiply-adds per output.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { RemovableHandle } from '../forward_hooks.js';
import { Linear, linearProduct } from '../layers/linear.js';
import { tpDim, toTp } from '../parallel/tp_dim.js';
import { floatWeight, linearDtype, quantizeWeightFp8 } from '../quantization/fp8.js';

/** An adapter's rank and alpha: it runs with scale weight · alpha / rank. */
export interface LoraShape {
  /** The rank r: A is [r, in], B [out, r]. */
  readonly rank: number;
  /** PEFT's lora_alpha. */
  readonly alpha: number;
}

/** One adapter of a linear: A [rank, in], B [out, rank], and alpha (scale alpha / rank). */
interface Adapter {
  readonly rank: number;
  readonly alpha: number;
  readonly a: dt.Tensor;
  readonly b: dt.Tensor;
}

/** An adapter that adds to a linear's output now (LinearLora.running()). */
export interface RunningAdapter {
  /** lora_A [rank, in]. */
  readonly a: dt.Tensor;
  /** lora_B [out, rank] times weight · alpha / rank: the adapter adds `b` (A x). */
  readonly b: dt.Tensor;
}

/** An active adapter: its weight, and its B times weight · alpha / rank (the adapter's own B when that is 1). */
interface Active {
  readonly weight: number;
  readonly scaledB: dt.Tensor;
}

/** A linear laid wide (LinearLora.layout): its weight the first `in` columns of `buffer`. */
interface Wide {
  /** [out, in + lead rank + Σ rank]: W, zeros for the lead's columns (shareLoraJoin), then each running adapter's scaled B. */
  readonly buffer: dt.Tensor;
  /** [lead rank + Σ rank, in]: the lead's A (shareLoraJoin), then the running adapters' A, stacked. */
  readonly a: dt.Tensor;
  /** The weight's id when laid: a later change (or replacement) of the weight makes the layout stale. */
  readonly weightId: number;
  /** The A of the linears sharing the join, laid before this one's columns (zeros in `buffer`): not owned here. */
  readonly lead: dt.Tensor | undefined;
}

/** A linear laid tall (LinearLora.layout): its weight the first `out` rows of `weight`, its bias the first `out` of `bias`. */
interface Tall {
  /** [out + Σ rank, in]: W, then each running adapter's A. */
  readonly weight: dt.Tensor;
  /** [out + Σ rank]: b, then zeros; undefined for a linear without a bias. */
  readonly bias: dt.Tensor | undefined;
  /** [out, Σ rank]: the running adapters' scaled B side by side (made by the layout: owned here). */
  readonly b: dt.Tensor;
  /** The weight's and the bias's ids when laid: a later change of either makes the layout stale. */
  readonly weightId: number;
  readonly biasId: number | undefined;
}

/**
 * A linear laid tall (LinearLora.tall()): multiply its inputs by `weight` (and add `bias`) where
 * the linear's own would go, then `finish` the product.
 */
export interface TallLora {
  /** `[out + Σ rank, in]`: the linear's weight, then the running adapters' A under it. */
  readonly weight: dt.Tensor;
  /** `[out + Σ rank]`: the linear's bias, then zeros; undefined without a bias. */
  readonly bias: dt.Tensor | undefined;
  /** The linear's output for a product [..., out + Σ rank] by `weight`: its first `out` columns plus B times the rest. */
  finish(product: dt.Tensor): dt.Tensor;
}

/** Where the linear's weight (and an FP8 weight's scales) were before fusing, and which adapters went into it. */
interface Fused {
  readonly original: dt.Tensor;
  readonly originalScale: dt.Tensor | undefined;
  readonly names: readonly string[];
  /** Whether `original` lies in a buffer layout() made (unfuse puts it back there). */
  readonly originalLaid: boolean;
}

const registry = new WeakMap<Linear, LinearLora>();
const sharedJoins = new WeakMap<Linear, () => dt.Tensor | undefined>(); // shareLoraJoin's leads
let versions = 0; // every change of any linear's adapters takes the next number (see version)

/** The LoRA adapters of `linear`, or undefined when it has none. */
export function linearLora(linear: Linear): LinearLora | undefined {
  return registry.get(linear);
}

/**
 * What the active, unfused adapters of `linear` add to its output for `inputs`: one input [..., in],
 * or parts side by side along the last dim (a linear over concatenated inputs); undefined when
 * none would add anything. Placed as `like` (the base output) lies.
 */
export function loraDelta(linear: Linear, inputs: readonly dt.Tensor[], like?: dt.Tensor): dt.Tensor | undefined {
  return registry.get(linear)?.delta(inputs, like);
}

/** [x | A x] for the adapters' A stacked in `a`: the input a wide layout's buffer multiplies (one lora_join op). */
export function loraJoin(x: dt.Tensor, a: dt.Tensor): dt.Tensor {
  return dt.cat([x, dt.F.linear(x, a)], -1);
}

/**
 * x Wᵀ + (A x) Bᵀ + b in one matmul, for a weight W laid as the first columns of `buffer` [W | B]
 * and the adapters' A stacked in `a` (see the file's comment): [x | A x] times the buffer.
 */
export function loraWideProduct(x: dt.Tensor, a: dt.Tensor, buffer: dt.Tensor, bias?: dt.Tensor): dt.Tensor {
  return dt.F.linear(loraJoin(x, a), buffer, bias);
}

/**
 * Lets `linear`, when laid wide (LinearLora.layout), share its join with linears that read the
 * same input before it: `lead()` gives their adapters' A, stacked as their own buffer's B columns
 * are (undefined while they have none laid). See the file's comment.
 */
export function shareLoraJoin(linear: Linear, lead: () => dt.Tensor | undefined): void {
  sharedJoins.set(linear, lead);
}

/**
 * `linear.forward(x)` with its running adapters, their products accumulating into the base's
 * (see the file's comment); undefined when none would add anything. For linears whose weight is
 * whole on every mesh dim (the split ones add the delta after their own forward).
 */
export function loraLinear(linear: Linear, x: dt.Tensor): dt.Tensor | undefined {
  const lora = registry.get(linear);
  if (!lora) return undefined;
  // in a tidy of its own: the controller fuses a product into the add or GELU that reads it only
  // when it sees the product released in the same segment (the caller's tidy ends blocks later)
  return dt.tidy(() => {
    const wide = lora.wide();
    if (wide) return loraWideProduct(x, wide.a, wide.buffer, linear.bias);
    const tall = lora.tall();
    if (tall) return tall.finish(dt.F.linear(x, tall.weight, tall.bias));
    if (!linear.weight.placements.every((p) => p.isReplicate())) {
      const out = linearProduct(linear, x, linear.bias);
      const delta = lora.delta([x], out);
      return delta ? out.add(delta) : out;
    }
    return lora.accumulate([x], linearProduct(linear, x, linear.bias));
  });
}

/**
 * Checks that `a` [rank, in] and `b` [out, rank] (tensors, or what a file says of them: their
 * shapes) fit `linear`; the error names `where` (the module's path and the file).
 */
export function checkLoraFits(linear: Linear, where: string, a: { readonly shape: readonly number[] }, b: { readonly shape: readonly number[] }): void {
  const { inFeatures, outFeatures } = linear;
  if (a.shape.length !== 2 || b.shape.length !== 2 || a.shape[1] !== inFeatures || b.shape[0] !== outFeatures || a.shape[0] !== b.shape[1]) {
    throw new DTorchError(
      ErrorCode.BadFile,
      `${where}: a LoRA for a linear of ${inFeatures} inputs and ${outFeatures} outputs needs lora_A [rank, ${inFeatures}] and lora_B [${outFeatures}, rank] of one rank, got lora_A [${a.shape.join(', ')}] and lora_B [${b.shape.join(', ')}]; is the adapter for this model?`,
    );
  }
}

/** The adapters of one Linear (PEFT's LoraLayer); made by {@link LinearLora.of}. */
export class LinearLora {
  /** The linear the adapters ride on. */
  readonly linear: Linear;
  readonly #adapters = new Map<string, Adapter>();
  #active = new Map<string, Active>();
  #enabled = true;
  #fused: Fused | undefined;
  #hook: RemovableHandle | undefined;
  #version = ++versions;
  #wide: Wide | undefined;
  #tall: Tall | undefined;
  #laidWeightId: number | undefined; // the weight's id while it lies in a buffer layout() made
  #laidBiasId: number | undefined; // the bias's id while it lies in a buffer layout() made (tall)

  private constructor(linear: Linear) {
    this.linear = linear;
  }

  /** The adapters of `linear`, made (empty) when it has none. */
  static of(linear: Linear): LinearLora {
    let lora = registry.get(linear);
    if (!lora) registry.set(linear, (lora = new LinearLora(linear)));
    return lora;
  }

  /** A number that changes with every change of the adapters (a cache built from them is stale when it did). */
  get version(): number {
    return this.#version;
  }

  /** The adapters' names, in the order they were added. */
  get names(): string[] {
    return [...this.#adapters.keys()];
  }

  /** Rank and alpha of adapter `name` (it runs with scale alpha / rank), or undefined. */
  adapter(name: string): LoraShape | undefined {
    const a = this.#adapters.get(name);
    return a && { rank: a.rank, alpha: a.alpha };
  }

  /** The active adapters and their weights. */
  get active(): Map<string, number> {
    return new Map([...this.#active].map(([name, a]) => [name, a.weight]));
  }

  /** Whether the adapters run (disable() turns them off without forgetting them). */
  get enabled(): boolean {
    return this.#enabled;
  }

  /** The adapters fused into the weight, or none. */
  get fusedNames(): readonly string[] {
    return this.#fused?.names ?? [];
  }

  /**
   * Adds adapter `name` (A [rank, in], B [out, rank], taken over: placed as the weight lies, in its
   * dtype) with `alpha`, inactive until setActive names it. Call check() first.
   */
  add(name: string, a: dt.Tensor, b: dt.Tensor, alpha: number): void {
    const w = this.linear.weight;
    // A lies as the weight's input columns do, B as its output rows (see the file's comment), in
    // the dtype the linear computes in (an FP8 weight's adapters stay in its float dtype)
    const dtype = linearDtype(this.linear);
    const aPlaced = placeLike(a, w, dtype, w.placements.map((p) => (p.isShard(0) ? dt.Replicate() : p)));
    const bPlaced = placeLike(b, w, dtype, w.placements.map((p) => (p.isShard(1) ? dt.Replicate() : p)));
    this.#adapters.set(name, { rank: a.shape[0]!, alpha, a: dt.keep(aPlaced), b: dt.keep(bPlaced) });
    // Linear's own forward asks for the adapters (loraLinear); a class with its own (the parallel
    // linears) gets the delta added after it
    if (Object.getPrototypeOf(this.linear).forward !== Linear.prototype.forward) {
      this.#hook ??= this.linear.registerForwardHook((_m, args, output) => {
        const delta = this.delta([args[0] as dt.Tensor], output as dt.Tensor);
        return delta && (output as dt.Tensor).add(delta);
      });
    }
    this.#version = ++versions;
  }

  /** Makes `weights` (name -> weight) the active adapters; the others stay loaded, inactive. */
  setActive(weights: ReadonlyMap<string, number>): void {
    for (const name of this.#active.keys()) this.#dropActive(name);
    this.#active = new Map(
      [...weights].filter(([name]) => this.#adapters.has(name)).map(([name, weight]) => {
        const { alpha, rank, b } = this.#adapters.get(name)!;
        const scale = (weight * alpha) / rank;
        return [name, { weight, scaledB: scale === 1 ? b : dt.keep(b.mul(scale)) }];
      }),
    );
    this.#retrace();
  }

  /** Turns the adapters on or off (disableLora / enableLora), keeping them and their weights. */
  setEnabled(on: boolean): void {
    if (this.#enabled === on) return;
    this.#enabled = on;
    this.#retrace();
  }

  /** Removes adapter `name` (its memory released). Returns whether it was there. */
  remove(name: string): boolean {
    const adapter = this.#adapters.get(name);
    if (!adapter) return false;
    if (this.#fused?.names.includes(name)) throw new DTorchError(ErrorCode.InvalidArgument, `LoRA adapter "${name}" is fused into the weights; unfuseLora() before deleting it`);
    this.#dropActive(name);
    this.#active.delete(name);
    adapter.a.dispose();
    adapter.b.dispose();
    this.#adapters.delete(name);
    if (this.#adapters.size === 0) {
      this.#hook?.remove();
      this.#hook = undefined;
      if (!this.#fused) registry.delete(this.linear);
    }
    this.#retrace();
    return true;
  }

  /**
   * Adds scale · Σ (active weight · alpha / rank) · B A of the active adapters to the weight, in
   * float32 then the weight's dtype (an FP8 weight: dequantized, summed, quantized again with new
   * scales); the weight as it was is kept for unfuse(). The fused adapters then add nothing at run time.
   */
  fuse(scale: number): void {
    if (this.#fused) throw new DTorchError(ErrorCode.InvalidArgument, 'fuseLora: the adapters are fused already; unfuseLora() first');
    const active = [...this.#active].filter(() => this.#enabled);
    if (active.length === 0) return;
    const w = this.linear.weight;
    const fp8 = this.linear.weight_scale;
    const fused = dt.tidy(() => {
      let sum = fp8 ? floatWeight(this.linear) : w.to('float32');
      for (const [name, { weight }] of active) {
        const { a, b, alpha, rank } = this.#adapters.get(name)!;
        const product = b.to('float32').matmul(a.to('float32'));
        const placed = product.placements.every((p, d) => p.equals(w.placements[d]!)) ? product : product.redistribute(w.placements);
        sum = sum.add(placed.mul((scale * weight * alpha) / rank));
      }
      return fp8 ? quantizeWeightFp8(sum) : { weight: sum.to(w.dtype), scale: undefined };
    });
    // a second handle on the weight's storage keeps it (no copy) for unfuse
    const original = dt.keep(w.view(w.shape));
    const originalScale = fp8 && dt.keep(fp8.view(fp8.shape));
    const originalLaid = this.#laid();
    this.linear.setTensor('weight', fused.weight);
    if (fused.scale) this.linear.setTensor('weight_scale', fused.scale);
    this.#fused = { original, originalScale, names: active.map(([name]) => name), originalLaid };
    this.#version = ++versions;
  }

  /** Puts back the weight fuse() started from (the same bits). Returns whether anything was fused. */
  unfuse(): boolean {
    const fused = this.#fused;
    if (!fused) return false;
    this.#fused = undefined;
    this.#version = ++versions;
    this.linear.setTensor('weight', fused.original);
    if (fused.originalScale) this.linear.setTensor('weight_scale', fused.originalScale);
    if (fused.originalLaid) this.#laidWeightId = this.linear.weight.id;
    if (this.#adapters.size === 0) registry.delete(this.linear);
    return true;
  }

  /**
   * Forgets the fused state, keeping the fused weight as the linear's own (unloadLoraWeights after
   * fuseLora, as diffusers keeps the merged weights): the weight it started from is released.
   */
  keepFused(): void {
    this.#fused?.original.dispose();
    this.#fused?.originalScale?.dispose();
    this.#fused = undefined;
  }

  /** Removes every adapter (fused ones stay in the weight: see keepFused()), and lays the weight on its own again. */
  clear(): void {
    this.#removeAll();
    this.layout(false);
    registry.delete(this.linear);
  }

  /**
   * Releases every tensor the adapters hold (their factors, scaled B, a wide buffer, the weight
   * fuse() kept), without laying the weight back on its own: for a linear being disposed.
   */
  dispose(): void {
    this.#removeAll();
    this.#dropLayout();
    this.#laidWeightId = undefined;
    this.#laidBiasId = undefined;
    registry.delete(this.linear);
  }

  // Forgets the fused state (the weight as it is stays) and removes every adapter.
  #removeAll(): void {
    this.keepFused();
    for (const name of this.names) this.remove(name);
  }

  // Releases what a layout made: the [W | B] buffer and stacked A, or the [W; A] and [b; 0] buffers and the B beside them.
  #dropLayout(): void {
    this.#wide?.buffer.dispose();
    this.#wide?.a.dispose();
    this.#wide = undefined;
    this.#tall?.weight.dispose();
    this.#tall?.bias?.dispose();
    this.#tall?.b.dispose();
    this.#tall = undefined;
  }

  /** The adapters that add to the output now (active, enabled, not fused): A and the scaled B. */
  running(): RunningAdapter[] {
    if (!this.#enabled) return [];
    const fused = this.#fused?.names ?? [];
    return [...this.#active].filter(([name]) => !fused.includes(name)).map(([name, { scaledB }]) => ({ a: this.#adapters.get(name)!.a, b: scaledB }));
  }

  /**
   * Lays the weight for the calls after a change (see the file's comment): with `wide` (the owner
   * runs this linear's own forward: not a member of a packed group), where a float weight lies
   * whole on every mesh dim (Linear's own forward), beside its running adapters' B when it widens
   * (in < out), above their A otherwise (DTORCH_LORA_TALL); else on its own, a buffer an earlier
   * layout made copied back to the weight's (and bias's) size, the adapters' part released.
   * Returns whether the linear runs laid with its adapters now.
   */
  layout(wide: boolean): boolean {
    const l = this.linear;
    // DTORCH_LORA_JOIN=0: each linear joins its input apart, laid without the lead's zeros
    const lead = wide && dt.nativeSettings().loraJoin ? sharedJoins.get(l)?.() : undefined;
    if (wide && this.#wide?.weightId === l.weight.id && this.#wide.lead === lead) return true; // laid already, nothing changed since
    if (wide && this.#tall?.weightId === l.weight.id && this.#tall.biasId === l.bias?.id) return true;
    this.#dropLayout();
    const running = this.running();
    const laid =
      wide &&
      running.length > 0 &&
      Object.getPrototypeOf(l).forward === Linear.prototype.forward &&
      l.weight_scale === undefined &&
      l.weight.placements.every((p) => p.isReplicate());
    if (laid && l.inFeatures < l.outFeatures) {
      this.#layWide(running, lead);
      return true;
    }
    if (laid && dt.nativeSettings().loraTall) {
      this.#layTall(running);
      return true;
    }
    if (this.#laid()) l.setTensor('weight', l.weight.clone());
    if (this.#biasLaid()) l.setTensor('bias', l.bias!.clone());
    this.#laidWeightId = undefined;
    this.#laidBiasId = undefined;
    return false;
  }

  // [W | 0 | B…] and [lead A; A…] (see the file's comment): the weight becomes the buffer's first columns.
  #layWide(running: readonly RunningAdapter[], lead: dt.Tensor | undefined): void {
    const l = this.linear;
    const { buffer, a } = dt.tidy(() => {
      // a shared join's lead columns meet zeros here (see the file's comment)
      const zeros = lead ? [dt.zeros([l.outFeatures, lead.shape[0]!], { mesh: l.weight.mesh, dtype: l.weight.dtype })] : [];
      const factors = running.map((r) => r.a);
      return { buffer: dt.cat([l.weight, ...zeros, ...running.map((r) => r.b)], 1), a: dt.cat(lead ? [lead, ...factors] : factors, 0) };
    });
    l.setTensor('weight', buffer.narrow(1, 0, l.inFeatures)); // the Parameter takes the view's value: the old weight is released
    this.#wide = { buffer: dt.keep(buffer), a: dt.keep(a), weightId: l.weight.id, lead };
    this.#laidWeightId = l.weight.id;
  }

  // [W; A…], [b; 0] and [B…] (see the file's comment): the weight and bias become the buffers' first rows.
  #layTall(running: readonly RunningAdapter[]): void {
    const l = this.linear;
    const rank = running.reduce((sum, r) => sum + r.a.shape[0]!, 0);
    const { weight, bias, b } = dt.tidy(() => ({
      weight: dt.cat([l.weight, ...running.map((r) => r.a)], 0),
      bias: l.bias && dt.cat([l.bias, dt.zeros([rank], { mesh: l.bias.mesh, dtype: l.bias.dtype })], 0),
      b: dt.cat(running.map((r) => r.b), 1),
    }));
    l.setTensor('weight', weight.narrow(0, 0, l.outFeatures)); // the Parameters take the views' values: the old ones are released
    if (bias) l.setTensor('bias', bias.narrow(0, 0, l.outFeatures));
    this.#tall = { weight: dt.keep(weight), bias: bias && dt.keep(bias), b: dt.keep(b), weightId: l.weight.id, biasId: l.bias?.id };
    this.#laidWeightId = l.weight.id;
    this.#laidBiasId = l.bias?.id;
  }

  /** The buffers [W; A…] and [b; 0] the forward multiplies while the weight and bias lie as layout() left them, and how to finish the product; else undefined. */
  tall(): TallLora | undefined {
    const tall = this.#tall;
    if (!tall || tall.weightId !== this.linear.weight.id || tall.biasId !== this.linear.bias?.id) return undefined;
    const out = this.linear.outFeatures;
    const rank = tall.b.shape[1]!;
    return {
      weight: tall.weight,
      bias: tall.bias,
      // B (A x) accumulates into y's columns where they lie (linear_add on rows of a wider buffer)
      finish: (product) => dt.F.linear(product.narrow(-1, out, rank), tall.b).add(product.narrow(-1, 0, out)),
    };
  }

  /** The buffer [W | B…] and stacked A the forward multiplies while the weight lies as layout() left it; else undefined. */
  wide():
    | {
        /** W, then zeros for a shared join's lead, then each running adapter's scaled B: `[out, in + lead rank + Σ rank]`. */
        readonly buffer: dt.Tensor;
        /** The lead's A, then the running adapters' A, stacked: `[lead rank + Σ rank, in]`. */
        readonly a: dt.Tensor;
        /** The lead A it was laid with (shareLoraJoin), the same tensor `lead()` gave; undefined without. */
        readonly lead: dt.Tensor | undefined;
      }
    | undefined {
    const wide = this.#wide;
    return wide && wide.weightId === this.linear.weight.id ? wide : undefined;
  }

  /**
   * `out` (the base product, bias included) plus each running adapter's B (A x) for `inputs`, each
   * product accumulating into the sum (fused: the small matmul adds into `out` in place, and the
   * base matmul keeps its own kernel and epilogue). For a weight whole on every mesh dim.
   */
  accumulate(inputs: readonly dt.Tensor[], out: dt.Tensor): dt.Tensor {
    let sum = out;
    for (const { a, b } of this.running()) sum = dt.F.linear(projectRank(inputs, a), b).add(sum);
    return sum;
  }

  /**
   * See {@link loraDelta}: without `like`, the delta is placed as its product falls.
   */
  delta(inputs: readonly dt.Tensor[], like?: dt.Tensor): dt.Tensor | undefined {
    const running = this.running();
    if (running.length === 0) return undefined;
    const tp = tpDim(this.linear.weight.mesh);
    let sum: dt.Tensor | undefined;
    for (const { a, b } of running) {
      let h = projectRank(inputs, a, tp);
      // the r numbers of each token, whole on 'tp' (summed or gathered: small), scaled, then B
      if (tp >= 0 && !h.placements[tp]!.isReplicate()) h = toTp(h, dt.Replicate());
      // a later adapter's matmul accumulates into the sum (fused as the base's is)
      sum = sum ? dt.F.linear(h, b).add(sum) : dt.F.linear(h, b);
    }
    if (!like) return sum;
    const placed = sum!.placements.every((p, d) => p.equals(like.placements[d]!)) ? sum! : sum!.redistribute(like.placements);
    return placed.dtype === like.dtype ? placed : placed.to(like.dtype);
  }

  // A new handle on the weight's storage (no copy): what traced this linear traces again.
  #retrace(): void {
    this.#version = ++versions;
    const w = this.linear.weight;
    const laid = this.#laid();
    this.linear.setTensor('weight', w.view(w.shape));
    if (laid) this.#laidWeightId = this.linear.weight.id;
  }

  // Whether the weight lies in a buffer layout() made (not replaced since).
  #laid(): boolean {
    return this.#laidWeightId !== undefined && this.#laidWeightId === this.linear.weight.id;
  }

  // Whether the bias lies in a buffer layout() made (not replaced since).
  #biasLaid(): boolean {
    return this.#laidBiasId !== undefined && this.#laidBiasId === this.linear.bias?.id;
  }

  // Releases the scaled B of active adapter `name` (a copy, unless its scale is 1).
  #dropActive(name: string): void {
    const active = this.#active.get(name);
    if (active && active.scaledB !== this.#adapters.get(name)?.b) active.scaledB.dispose();
  }
}

// The rank-r projection A x of one input, or of parts side by side (each part meets its own
// columns of A); on a mesh with a 'tp' dim (`tp`), a part meets A's columns split as they lie.
function projectRank(inputs: readonly dt.Tensor[], a: dt.Tensor, tp = -1): dt.Tensor {
  let h: dt.Tensor | undefined;
  let offset = 0;
  for (const part of inputs) {
    const width = part.shape.at(-1)!;
    const columns = inputs.length === 1 ? a : a.narrow(1, offset, width);
    const x = tp >= 0 && columns.placements[tp]!.isShard() ? toTp(part, dt.Shard(-1)) : part;
    const product = dt.F.linear(x, columns);
    h = h ? h.add(product) : product;
    offset += width;
  }
  return h!;
}

// `t` on the weight's mesh with `placements`, in its dtype; `t` itself is released when a new
// tensor is made from it.
function placeLike(t: dt.Tensor, weight: dt.Tensor, dtype: dt.DType, placements: readonly dt.Placement[]): dt.Tensor {
  const cast = t.dtype === dtype ? t : t.to(dtype);
  const placed = cast.mesh === weight.mesh ? cast.redistribute(placements) : cast.redistribute(weight.mesh, placements);
  if (cast !== t && cast !== placed) cast.dispose();
  if (placed !== t) t.dispose();
  return placed;
}
