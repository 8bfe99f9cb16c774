// Placements: how a tensor lies along one mesh dim. Frozen value types that compare by value,
// print short (S(0), R, P(sum)) and long (Shard(dim=0)), and cross to native as one number.
import { DTorchError, ErrorCode, checkInteger, invalidParameter } from '@dtorch/common';

/**
 * How the devices' values of a {@link Partial} placement combine into the logical value: their sum,
 * mean ('avg'), elementwise max or elementwise min.
 */
export type ReduceOp = 'sum' | 'avg' | 'max' | 'min';
const reduceOps: readonly ReduceOp[] = ['sum', 'avg', 'max', 'min'];

/**
 * How a distributed tensor lies along one mesh dim, as DTensor's placements: a tensor has one per
 * mesh dim. Made by {@link Shard}, {@link Replicate} and {@link Partial}; the values are frozen,
 * compare by value ({@link Placement.equals}) and print short (`S(0)`, `R`, `P(sum)`) with
 * `String(p)` or long (`Shard(dim=0)`) with `describe()`.
 */
export abstract class Placement {
  /** Which placement this is: 'shard', 'replicate' or 'partial'. */
  abstract readonly kind: 'shard' | 'replicate' | 'partial';
  /** Wire code shared with native: Shard(d) -> d, Replicate -> -1, Partial(sum/avg/max/min) -> -2..-5. */
  abstract code(): number;
  /** Long form: Shard(dim=0), Replicate(), Partial(reduce=sum). */
  abstract describe(): string;
  /** Whether `other` is the same placement: same kind, and the same dim or reduce op. */
  equals(other: Placement): boolean {
    return this.code() === other.code();
  }
  /** Whether this is a Shard placement; with `dim`, a Shard of tensor dim `dim` (compared as stored: negative dims are not normalised). */
  isShard(_dim?: number): this is ShardPlacement {
    return false;
  }
  /** Whether this is Replicate(). */
  isReplicate(): this is ReplicatePlacement {
    return false;
  }
  /** Whether this is a Partial placement (of any reduce op). */
  isPartial(): this is PartialPlacement {
    return false;
  }
}

/**
 * Shard(dim): the tensor is split along tensor dim `dim` over the devices of the mesh dim, in
 * torch.chunk pieces: with n devices, each holds the next ceil(size / n) elements of that dim in
 * device order, so where the size does not divide the last devices hold fewer or none. Made by
 * {@link Shard}.
 */
export class ShardPlacement extends Placement {
  /** Always 'shard'. */
  readonly kind = 'shard' as const;
  /** @param dim - The tensor dim that is split (negative counts from the end until normalised against a tensor). */
  constructor(readonly dim: number) {
    super();
    Object.freeze(this);
  }
  code(): number {
    return this.dim;
  }
  /** True; with `dim`, whether this shards tensor dim `dim`. */
  override isShard(dim?: number): this is ShardPlacement {
    return dim === undefined || dim === this.dim;
  }
  override toString(): string {
    return `S(${this.dim})`;
  }
  describe(): string {
    return `Shard(dim=${this.dim})`;
  }
}

/** Replicate(): every device of the mesh dim holds the full tensor (the same values). Made by {@link Replicate}. */
export class ReplicatePlacement extends Placement {
  /** Always 'replicate'. */
  readonly kind = 'replicate' as const;
  constructor() {
    super();
    Object.freeze(this);
  }
  code(): number {
    return -1;
  }
  /** Always true. */
  override isReplicate(): this is ReplicatePlacement {
    return true;
  }
  override toString(): string {
    return 'R';
  }
  describe(): string {
    return 'Replicate()';
  }
}

/**
 * Partial(reduce): every device of the mesh dim holds a tensor of the full shape, and the
 * logical value is their reduction (`reduce`: sum, avg, max or min over the devices), not yet
 * computed. Ops such as a sum over a sharded dim produce it; reading the tensor or
 * redistributing it to Replicate (all-reduce) or Shard (reduce-scatter) performs the reduction.
 * Made by {@link Partial}.
 */
export class PartialPlacement extends Placement {
  /** Always 'partial'. */
  readonly kind = 'partial' as const;
  /** @param reduce - How the devices' values combine into the logical value. */
  constructor(readonly reduce: ReduceOp) {
    super();
    Object.freeze(this);
  }
  code(): number {
    return -2 - reduceOps.indexOf(this.reduce);
  }
  /** Always true. */
  override isPartial(): this is PartialPlacement {
    return true;
  }
  override toString(): string {
    return `P(${this.reduce})`;
  }
  describe(): string {
    return `Partial(reduce=${this.reduce})`;
  }
}

const replicate = new ReplicatePlacement();
const shards: ShardPlacement[] = [];
const partials = new Map<ReduceOp, PartialPlacement>(reduceOps.map((op) => [op, new PartialPlacement(op)]));

/** Shard along tensor dim `dim` (negative dims count from the end of the tensor). */
export function Shard(dim: number): ShardPlacement {
  // placements cross to native as int32 codes (Replicate and Partial take the negative ones)
  checkInteger('Shard dim', dim, -(2 ** 31), 2 ** 31 - 1);
  if (dim < 0 || dim >= 64) return new ShardPlacement(dim); // negatives are normalised against the tensor where used
  return (shards[dim] ??= new ShardPlacement(dim));
}

/** Replicate on this mesh dim: every device holds the full tensor (see {@link ReplicatePlacement}). Returns one shared value. */
export function Replicate(): ReplicatePlacement {
  return replicate;
}

/**
 * A pending reduction on this mesh dim: each device holds a full-shape part and the logical
 * value is their `reduce` (default 'sum'; see {@link PartialPlacement}). Throws INVALID_ARGUMENT
 * for an unknown reduce op.
 */
export function Partial(reduce: ReduceOp = 'sum'): PartialPlacement {
  const p = partials.get(reduce);
  if (!p) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected one of ${reduceOps.join(', ')} for Partial reduce but received ${String(reduce)}`);
  }
  return p;
}

/**
 * The placement of a wire code, the inverse of {@link Placement.code}: d >= 0 is Shard(d), -1
 * Replicate, -2..-5 Partial(sum/avg/max/min).
 */
export function placementFromCode(code: number): Placement {
  if (code >= 0) return Shard(code);
  if (code === -1) return replicate;
  const op = reduceOps[-2 - code];
  if (!op) throw new DTorchError(ErrorCode.Internal, `unknown placement code ${code}`);
  return partials.get(op)!;
}

/**
 * Checks one placement per mesh dim and turns negative Shard dims into dims of an
 * `ndim`-d tensor. Throws PLACEMENT_MISMATCH saying which placement is wrong.
 */
export function normalizePlacements(placements: unknown, meshNdim: number, ndim: number, where: string): readonly Placement[] {
  if (!Array.isArray(placements) || !placements.every((p) => p instanceof Placement)) {
    throw invalidParameter(`${where} placements`, 'an array of placements (Shard(dim), Replicate(), Partial())', placements);
  }
  if (placements.length !== meshNdim) {
    throw new DTorchError(
      ErrorCode.PlacementMismatch,
      `${where}: got ${placements.length} placement(s) for a ${meshNdim}-d mesh; give one placement per mesh dim`,
    );
  }
  return placements.map((p: Placement) => {
    if (!(p instanceof ShardPlacement)) return p;
    const dim = p.dim < 0 ? p.dim + ndim : p.dim;
    if (dim < 0 || dim >= ndim) {
      throw new DTorchError(
        ErrorCode.PlacementMismatch,
        `${where}: ${p.describe()} does not fit a ${ndim}-d tensor; shard a dim in [${-ndim}, ${ndim})`,
      );
    }
    return Shard(dim);
  });
}

/** The placements in short form in brackets, e.g. `[S(0), R]`. */
export function formatPlacements(placements: readonly Placement[]): string {
  return `[${placements.map(String).join(', ')}]`;
}
