// Placements: how a tensor lies along one mesh dim. Frozen value types that compare by value,
// print short (S(0), R, P(sum)) and long (Shard(dim=0)), and cross to native as one number.
import { DTorchError, ErrorCode, checkInteger, invalidParameter } from '@dtorch/common';

export type ReduceOp = 'sum' | 'avg' | 'max' | 'min';
const reduceOps: readonly ReduceOp[] = ['sum', 'avg', 'max', 'min'];

export abstract class Placement {
  abstract readonly kind: 'shard' | 'replicate' | 'partial';
  /** Wire code shared with native: Shard(d) -> d, Replicate -> -1, Partial(sum/avg/max/min) -> -2..-5. */
  abstract code(): number;
  /** Long form: Shard(dim=0), Replicate(), Partial(reduce=sum). */
  abstract describe(): string;
  equals(other: Placement): boolean {
    return this.code() === other.code();
  }
  isShard(_dim?: number): this is ShardPlacement {
    return false;
  }
  isReplicate(): this is ReplicatePlacement {
    return false;
  }
  isPartial(): this is PartialPlacement {
    return false;
  }
}

export class ShardPlacement extends Placement {
  readonly kind = 'shard' as const;
  constructor(readonly dim: number) {
    super();
    Object.freeze(this);
  }
  code(): number {
    return this.dim;
  }
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

export class ReplicatePlacement extends Placement {
  readonly kind = 'replicate' as const;
  constructor() {
    super();
    Object.freeze(this);
  }
  code(): number {
    return -1;
  }
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

export class PartialPlacement extends Placement {
  readonly kind = 'partial' as const;
  constructor(readonly reduce: ReduceOp) {
    super();
    Object.freeze(this);
  }
  code(): number {
    return -2 - reduceOps.indexOf(this.reduce);
  }
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

export function Replicate(): ReplicatePlacement {
  return replicate;
}

export function Partial(reduce: ReduceOp = 'sum'): PartialPlacement {
  const p = partials.get(reduce);
  if (!p) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected one of ${reduceOps.join(', ')} for Partial reduce but received ${String(reduce)}`);
  }
  return p;
}

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

export function formatPlacements(placements: readonly Placement[]): string {
  return `[${placements.map(String).join(', ')}]`;
}
