// Linears that read one input (an attention's q/k/v projections) run as one matmul, as
// diffusers' fuse_qkv_projections does, without a second copy of their weights: pack() moves the
// weights (and biases) into one buffer, side by side, and each linear's parameter becomes a view
// of its rows. forward() then joins the views along their rows, which the engine does without a
// copy (cat of neighbours in one buffer is that buffer: native/core/operators/shape.cpp), and
// splits the product. A GPU then runs one matmul instead of three: three launches fewer per
// layer, and a wider matmul for short sequences (CLIP's 77 tokens, SD3's 333 text tokens).
//
// The linears stay the model's parameters (state dict, loading, saving see them as before).
// When a parameter is replaced after pack() (loadStateDict, setTensor, Module.to), forward()
// runs the linears one by one, with the same values, until pack() is called again; a compiled
// call that read the packed views is traced again then, as the views were released.
//
// The linears' LoRA adapters (nn.LinearLora) run packed too (nn.packLoraFactors: one stacked A, one
// block-diagonal B with the scales). With float weights, pack() lays the weights in a buffer
// [Σ out, in + Σ rank] whose last columns are B, each linear's weight a view of its first `in`
// columns; forward() then computes h = A x and one matmul of [x | h] with the whole buffer:
// y = W x + B h + b in one pass over the output. Each adapted output would otherwise be read and
// written again by the adapters' product accumulating into it (2 × out per token, where [x | h]
// costs 2 × in more: q/k/v's output is 3 × their input). A change of adapters replaces the
// weights' handles (nn.LinearLora), so forward() runs the linears one by one until pack() lays
// the buffer again with the new B.
//
// Another linear reading the same input may join it once for both (nn.shareLoraJoin): its join
// [x | A x | A' x] starts with the columns this group's matmul reads (forwardJoined).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

/** Linears of one input run as one matmul over their weights packed side by side (pack()). */
export class PackedProjections {
  readonly #of: () => readonly nn.Linear[];
  #packedIds: number[] | undefined; // the parameters' ids as pack() left them
  #lora: { key: string; factors: nn.PackedLoraFactors | undefined } | undefined; // packLoraFactors' last answer
  #wide: { weight: dt.Tensor; a: dt.Tensor; key: string } | undefined; // [W | B] and A as pack() laid them

  /** `linears`: the module's linears now (a submodule replaced later is seen), of one input width. */
  constructor(linears: () => readonly nn.Linear[]) {
    this.#of = linears;
  }

  /**
   * Moves the weights (and biases) into one buffer each, every linear's parameter a view of its
   * rows; false (nothing changed) where they cannot share one: fewer than two, split over devices
   * (tensor parallel), other meshes, dtypes or input widths, a bias on some and not others.
   */
  pack(): boolean {
    const linears = this.#of();
    this.releaseLora();
    if (!packable(linears)) return false;
    const parameters = (l: nn.Linear, name: 'weight' | 'bias' | 'weight_scale') => (name === 'weight' ? l.weight : name === 'bias' ? l.bias! : l.weight_scale!);
    const names = (['weight', 'bias', 'weight_scale'] as const).filter((n) => n === 'weight' || parameters(linears[0]!, n) !== undefined);
    // float weights with running adapters: [W | B] in one buffer (see the file's comment)
    const key = nn.packedLoraKey(linears);
    const factors = linears[0]!.weight_scale ? undefined : nn.packLoraFactors(linears);
    for (const name of names) {
      const packed = dt.cat(linears.map((l) => parameters(l, name)), 0);
      const whole = name === 'weight' && factors ? dt.cat([packed, factors.b], 1) : packed;
      if (whole !== packed) packed.dispose();
      const width = linears[0]!.inFeatures;
      let row = 0;
      for (const l of linears) {
        // the same Parameter takes the view's value and releases its own: no second copy
        const rows = whole.narrow(0, row, l.outFeatures);
        if (whole === packed) l.setTensor(name, rows);
        else {
          l.setTensor(name, rows.narrow(1, 0, width));
          rows.dispose(); // the step between: kept, it would hold the buffer after the next pack()
        }
        row += l.outFeatures;
      }
      if (whole !== packed) this.#wide = { weight: dt.keep(whole), a: dt.keep(factors!.a), key };
      else whole.dispose(); // the views hold the buffer
    }
    factors?.b.dispose();
    this.#packedIds = ids(linears);
    for (const l of linears) groups.set(l, this);
    if (!this.#wide) this.#loraFactors(linears); // made now, outside any traced call (a LoRA change packs again)
    return true;
  }

  /** Whether forward() runs one matmul: pack() succeeded and no parameter was replaced since. */
  get packed(): boolean {
    return this.#isPacked(this.#of());
  }

  /**
   * The running adapters' A, stacked as the [W | B] buffer's B columns are, while pack() laid
   * them and nothing changed since; else undefined (forwardJoined needs it).
   */
  loraA(): dt.Tensor | undefined {
    const linears = this.#of();
    const wide = this.#wide;
    return wide && this.#isPacked(linears) && wide.key === nn.packedLoraKey(linears) ? wide.a : undefined;
  }

  /**
   * forward() of the input whose join [x | A x | …] (A: loraA()) another linear made: the one
   * matmul reads its first in + rank columns where they lie. Only while loraA() is defined.
   */
  forwardJoined(joined: dt.Tensor): dt.Tensor[] {
    const linears = this.#of();
    const wide = this.#wide!;
    return dt.tidy(() => {
      const product = dt.F.linear(joined.narrow(-1, 0, wide.weight.shape[1]!), wide.weight, packedBias(linears));
      return product.split(linears.map((l) => l.outFeatures), -1);
    });
  }

  /** Each linear's output for `x`: one matmul, split, while packed; else each linear's forward. */
  forward(x: dt.Tensor): dt.Tensor[] {
    const linears = this.#of(); // once per call: the list is rebuilt by each read
    if (!this.#isPacked(linears)) return linears.map((l) => l.forward(x));
    return dt.tidy(() => {
      const bias = packedBias(linears);
      const wide = this.#wide;
      if (wide && wide.key === nn.packedLoraKey(linears)) {
        // [x | A x] times [W | B]: the adapters ride in the base matmul's inner dim
        const product = nn.loraWideProduct(x, wide.a, wide.weight, bias);
        return product.split(linears.map((l) => l.outFeatures), -1);
      }
      const weight = dt.cat(linears.map((l) => l.weight), 0);
      const scale = linears[0]!.weight_scale ? dt.cat(linears.map((l) => l.weight_scale!), 0) : undefined;
      const base = (b?: dt.Tensor) => (scale ? dt.F.fp8Linear(x, weight, scale, b) : dt.F.linear(x, weight, b));
      // the linears' LoRA adapters (which ride on a forward the packed matmul does not call) as
      // one product, accumulating into the base matmul's output (its bias in the epilogue)
      const lora = this.#loraFactors(linears);
      const product = lora ? dt.F.linear(dt.F.linear(x, lora.a), lora.b).add(base(bias)) : base(bias);
      return product.split(linears.map((l) => l.outFeatures), -1);
    });
  }

  /**
   * Drops the packed LoRA factors (a model's unloadLoraWeights; a change of adapters rebuilds them
   * anyway); a [W | B] buffer stays while the weights' views hold it, until pack() lays them anew.
   */
  releaseLora(): void {
    this.#lora?.factors?.a.dispose();
    this.#lora?.factors?.b.dispose();
    this.#lora = undefined;
    this.#wide?.weight.dispose();
    this.#wide?.a.dispose();
    this.#wide = undefined;
  }

  // The running adapters' packed factors, rebuilt when an adapter changed (nn.packedLoraKey).
  #loraFactors(linears: readonly nn.Linear[]): nn.PackedLoraFactors | undefined {
    const key = nn.packedLoraKey(linears);
    if (this.#lora?.key !== key) {
      this.releaseLora();
      const factors = nn.packLoraFactors(linears);
      if (factors) for (const t of [factors.a, factors.b]) dt.keep(t);
      this.#lora = { key, factors };
    }
    return this.#lora.factors;
  }

  #isPacked(linears: readonly nn.Linear[]): boolean {
    const packedIds = this.#packedIds;
    return packedIds !== undefined && ids(linears).every((id, i) => id === packedIds[i]);
  }
}

// The group each linear was last packed in (inPackedGroup).
const groups = new WeakMap<nn.Linear, PackedProjections>();

/** Whether `linear` runs in a packed group now (its own forward is not called then). */
export const inPackedGroup = (linear: nn.Linear): boolean => groups.get(linear)?.packed === true;

/** Releases the LoRA factors and [W | B] buffer of the packed group `linear` was packed into, if any (its model is being disposed). */
export const releasePackedLora = (linear: nn.Linear): void => groups.get(linear)?.releaseLora();

// The packed linears' biases side by side (a view of their buffer), or undefined without.
const packedBias = (linears: readonly nn.Linear[]): dt.Tensor | undefined => (linears[0]!.bias ? dt.cat(linears.map((l) => l.bias!), 0) : undefined);

// The linears' parameter ids, in order (a replaced value has a new id; an offloaded one, disposed, has none: -1).
const idOf = (t: dt.Tensor): number => (t.isDisposed ? -1 : t.id);
const ids = (linears: readonly nn.Linear[]): number[] => linears.flatMap((l) => (l.bias ? [idOf(l.weight), idOf(l.bias)] : [idOf(l.weight)]));

// Whether the linears can share one buffer (see pack()).
function packable(linears: readonly nn.Linear[]): boolean {
  const [first] = linears;
  if (!first || linears.length < 2) return false;
  const whole = (t: dt.Tensor) => t.placements.every((p) => p.isReplicate());
  return linears.every(
    (l) =>
      Object.getPrototypeOf(l).forward === nn.Linear.prototype.forward && // not a parallel linear's own forward
      l.inFeatures === first.inFeatures &&
      l.weight.mesh === first.weight.mesh &&
      l.weight.dtype === first.weight.dtype &&
      (l.weight_scale === undefined) === (first.weight_scale === undefined) &&
      whole(l.weight) &&
      (l.bias === undefined) === (first.bias === undefined) &&
      (!l.bias || (l.bias.dtype === first.bias!.dtype && whole(l.bias))),
  );
}

/** A module that owns PackedProjections: PreTrainedModel.packProjections() packs them. */
export interface HasPackedProjections {
  /** Packs this module's own projections; how many groups were packed. */
  packProjections(): number;
}

/** Whether `m` owns PackedProjections. */
export const hasPackedProjections = (m: unknown): m is HasPackedProjections =>
  typeof (m as Partial<HasPackedProjections>).packProjections === 'function';
