// A placement oracle that does not ask the engine: host tensors in float64, the ops on them as
// PyTorch defines them, each rank's piece of an input under any placements (torch.chunk sizes;
// Partial(sum) split into random parts), and the check whether per-rank results are a
// valid sharding of the full result under some output placements. An input placement
// combination is legal when, after slicing Replicate inputs locally (the only change a rank may
// make without communication), the op run on each rank's pieces assembles to the full result.
import { Gen, rng } from './random.js';

export interface Host {
  shape: number[];
  data: Float64Array;
}

/** One mesh dim's placement in the oracle's terms; Partial means Partial(sum). */
export type Pl = { kind: 'S'; dim: number } | { kind: 'R' } | { kind: 'P' };
export const S = (dim: number): Pl => ({ kind: 'S', dim });
export const R: Pl = { kind: 'R' };
export const P: Pl = { kind: 'P' };
export const plName = (p: Pl): string => (p.kind === 'S' ? `S(${p.dim})` : p.kind === 'R' ? 'R' : 'P(sum)');
export const plsName = (ps: readonly Pl[]): string => `[${ps.map(plName).join(', ')}]`;

/** Thrown by an op whose inputs do not fit (as PyTorch would): that local computation is impossible. */
export class ShapeError extends Error {}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const stridesOf = (shape: readonly number[]) => shape.map((_, d) => numel(shape.slice(d + 1)));

export function host(shape: number[], values: ArrayLike<number>): Host {
  if (values.length !== numel(shape)) throw new Error(`host: ${values.length} values for shape [${shape}]`);
  return { shape: [...shape], data: Float64Array.from(values) };
}

/** torch.chunk along a dim of `size` into `parts`: where piece `index` starts and its length. */
export function chunk(size: number, parts: number, index: number): { start: number; length: number } {
  const each = Math.ceil(size / parts);
  const start = Math.min(size, each * index);
  return { start, length: Math.max(0, Math.min(each, size - start)) };
}

// ---- ops ------------------------------------------------------------------------------------

function broadcastShape(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  return Array.from({ length: n }, (_, i) => {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new ShapeError(`shapes [${a}] and [${b}] do not broadcast`);
    return x === 1 ? y : x;
  });
}

// The flat index into `shape` (right-aligned, broadcast) of each flat index of `out`.
function broadcastIndex(shape: readonly number[], out: readonly number[]): Int32Array {
  const index = new Int32Array(numel(out));
  const st = stridesOf(shape);
  const ost = stridesOf(out);
  const lead = out.length - shape.length;
  for (let i = 0; i < index.length; i++) {
    let at = 0;
    for (let d = 0; d < shape.length; d++) {
      const c = Math.floor(i / ost[d + lead]!) % out[d + lead]!;
      if (shape[d] !== 1) at += c * st[d]!;
    }
    index[i] = at;
  }
  return index;
}

export function unary(x: Host, f: (v: number) => number): Host {
  return { shape: [...x.shape], data: x.data.map(f) };
}

export function binary(a: Host, b: Host, f: (x: number, y: number) => number): Host {
  const shape = broadcastShape(a.shape, b.shape);
  const [ia, ib] = [broadcastIndex(a.shape, shape), broadcastIndex(b.shape, shape)];
  const data = new Float64Array(numel(shape));
  for (let i = 0; i < data.length; i++) data[i] = f(a.data[ia[i]!]!, b.data[ib[i]!]!);
  return { shape, data };
}

/** torch.matmul: 1-D operands promoted and the added dim removed, batch dims broadcast. */
export function matmul(a: Host, b: Host): Host {
  if (a.shape.length === 0 || b.shape.length === 0) throw new ShapeError('matmul of a 0-d tensor');
  const a2 = a.shape.length === 1 ? [1, a.shape[0]!] : a.shape;
  const b2 = b.shape.length === 1 ? [b.shape[0]!, 1] : b.shape;
  const [m, k] = [a2.at(-2)!, a2.at(-1)!];
  const [k2, n] = [b2.at(-2)!, b2.at(-1)!];
  if (k !== k2) throw new ShapeError(`matmul: contracted sizes ${k} and ${k2}`);
  const batch = broadcastShape(a2.slice(0, -2), b2.slice(0, -2));
  const [ia, ib] = [broadcastIndex(a2.slice(0, -2), batch), broadcastIndex(b2.slice(0, -2), batch)];
  const data = new Float64Array(numel(batch) * m * n);
  for (let t = 0; t < numel(batch); t++) {
    const [oa, ob, oo] = [ia[t]! * m * k, ib[t]! * k * n, t * m * n];
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let l = 0; l < k; l++) s += a.data[oa + i * k + l]! * b.data[ob + l * n + j]!;
        data[oo + i * n + j] = s;
      }
    }
  }
  const shape = [...batch, ...(a.shape.length === 1 ? [] : [m]), ...(b.shape.length === 1 ? [] : [n])];
  return { shape, data };
}

export function transposeLast(x: Host): Host {
  const [r, c] = [x.shape.at(-2)!, x.shape.at(-1)!];
  const data = new Float64Array(x.data.length);
  for (let t = 0; t < x.data.length / (r * c); t++) {
    for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) data[t * r * c + j * r + i] = x.data[t * r * c + i * c + j]!;
  }
  return { shape: [...x.shape.slice(0, -2), c, r], data };
}

/** F.linear: x · Wᵀ (+ b); W must be [out, in]. */
export function linear(x: Host, w: Host, b?: Host): Host {
  if (w.shape.length !== 2) throw new ShapeError('linear: weight must be 2-D');
  const y = matmul(x, transposeLast(w));
  return b ? binary(y, b, (p, q) => p + q) : y;
}

/** sum or mean over `dims` (all when undefined), as torch.sum / torch.mean. */
export function reduce(x: Host, kind: 'sum' | 'mean', dims: number[] | undefined, keepdim: boolean): Host {
  const nd = x.shape.length;
  const reduced = new Set((dims ?? x.shape.map((_, d) => d)).map((d) => (d < 0 ? d + nd : d)));
  const outFull = x.shape.map((s, d) => (reduced.has(d) ? 1 : s));
  const data = new Float64Array(numel(outFull));
  const st = stridesOf(x.shape);
  const ost = stridesOf(outFull);
  for (let i = 0; i < x.data.length; i++) {
    let at = 0;
    for (let d = 0; d < nd; d++) if (!reduced.has(d)) at += (Math.floor(i / st[d]!) % x.shape[d]!) * ost[d]!;
    data[at] = data[at]! + x.data[i]!;
  }
  const count = numel(x.shape.filter((_, d) => reduced.has(d)));
  if (kind === 'mean') for (let i = 0; i < data.length; i++) data[i] = data[i]! / count; // 0/0 is NaN, as torch
  const shape = keepdim ? outFull : x.shape.filter((_, d) => !reduced.has(d));
  return { shape, data };
}

// ---- pieces ---------------------------------------------------------------------------------

/** A rank's piece: the index range it holds on each tensor dim, and its coordinates on the Partial mesh dims. */
interface PieceOf {
  start: number[];
  length: number[];
  partial: { meshDim: number; coord: number }[];
}

function pieceOf(shape: readonly number[], placements: readonly Pl[], meshShape: readonly number[], coords: readonly number[]): PieceOf {
  const start = shape.map(() => 0);
  const length = [...shape];
  const partial: PieceOf['partial'] = [];
  placements.forEach((p, j) => {
    if (p.kind === 'S') {
      const c = chunk(length[p.dim]!, meshShape[j]!, coords[j]!);
      start[p.dim] = start[p.dim]! + c.start;
      length[p.dim] = c.length;
    } else if (p.kind === 'P') {
      partial.push({ meshDim: j, coord: coords[j]! });
    }
  });
  return { start, length, partial };
}

export function coordinatesOf(meshShape: readonly number[], rank: number): number[] {
  const coords = meshShape.map(() => 0);
  for (let d = meshShape.length - 1, rest = rank; d >= 0; d--) {
    coords[d] = rest % meshShape[d]!;
    rest = Math.floor(rest / meshShape[d]!);
  }
  return coords;
}

/**
 * Splits every element of a tensor into parts (quarters within ±10, the last the rest), one per coordinate of each Partial mesh
 * dim. A part depends on the element's index in the full tensor (not in a piece), so slicing a
 * Replicate dim before or after splitting gives the same values, as it does on the ranks.
 */
export class PartialSplit {
  constructor(readonly seed: number) {}
  part(input: number, meshDim: number, parts: number, coord: number, element: number, value: number): number {
    let rest = value;
    for (let c = 0; c < parts - 1; c++) {
      const draw = (Math.floor(rng(this.seed * 7919 + input * 104729 + meshDim * 1299709 + c * 15485863 + element * 32452843)() * 81) - 40) / 4;
      if (c === coord) return draw;
      rest -= draw;
    }
    return rest;
  }
}

/** Rank `rank`'s local piece of input `input` (the full value `x`) under `placements`. */
export function localPiece(x: Host, input: number, placements: readonly Pl[], meshShape: readonly number[], rank: number, split: PartialSplit): Host {
  const piece = pieceOf(x.shape, placements, meshShape, coordinatesOf(meshShape, rank));
  const st = stridesOf(x.shape);
  const lst = stridesOf(piece.length);
  const data = new Float64Array(numel(piece.length));
  for (let i = 0; i < data.length; i++) {
    let at = 0;
    for (let d = 0; d < x.shape.length; d++) at += (piece.start[d]! + (Math.floor(i / lst[d]!) % piece.length[d]!)) * st[d]!;
    let v = x.data[at]!;
    for (const { meshDim, coord } of piece.partial) v = split.part(input, meshDim, meshShape[meshDim]!, coord, at, v);
    data[i] = v;
  }
  return { shape: piece.length, data };
}

// ---- assembly -------------------------------------------------------------------------------

export function close(a: number, b: number, relative: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b);
  if (!Number.isFinite(a) || !Number.isFinite(b)) return a === b;
  return Math.abs(a - b) <= relative * Math.max(1, Math.abs(b));
}

function equalHost(a: Host, b: Host, relative: number): boolean {
  if (a.shape.length !== b.shape.length || a.shape.some((s, d) => s !== b.shape[d])) return false;
  return a.data.every((v, i) => close(v, b.data[i]!, relative));
}

function concat(parts: Host[], dim: number): Host {
  const shape = [...parts[0]!.shape];
  shape[dim] = parts.reduce((n, p) => n + p.shape[dim]!, 0);
  const outer = numel(shape.slice(0, dim));
  const data = new Float64Array(numel(shape));
  let at = 0;
  for (let o = 0; o < outer; o++) {
    for (const p of parts) {
      const run = numel(p.shape.slice(dim));
      data.set(p.data.subarray(o * run, (o + 1) * run), at);
      at += run;
    }
  }
  return { shape, data };
}

/**
 * The full tensor that per-rank results `local` (by rank) stand for under `placements`, or
 * undefined when they are not a valid sharding: Replicate ranks must agree, Partial ranks share
 * a shape and sum, Shard ranks hold torch.chunk pieces. Mesh dims are undone last first, the
 * reverse of how pieces are cut.
 */
export function assemble(local: readonly Host[], placements: readonly Pl[], meshShape: readonly number[], relative = 1e-9): Host | undefined {
  const strides = stridesOf(meshShape);
  const combine = (meshDim: number, rankBase: number): Host | undefined => {
    if (meshDim === meshShape.length) return local[rankBase];
    const children: Host[] = [];
    for (let c = 0; c < meshShape[meshDim]!; c++) {
      const child = combine(meshDim + 1, rankBase + c * strides[meshDim]!);
      if (!child) return undefined;
      children.push(child);
    }
    const first = children[0]!;
    const sameShape = (h: Host) => h.shape.length === first.shape.length && h.shape.every((s, d) => s === first.shape[d]);
    const p = placements[meshDim]!;
    if (p.kind === 'R') return children.every((h) => equalHost(h, first, relative)) ? first : undefined;
    if (p.kind === 'P') {
      if (!children.every(sameShape)) return undefined;
      const data = new Float64Array(first.data.length);
      for (const h of children) h.data.forEach((v, i) => (data[i] = data[i]! + v));
      return { shape: [...first.shape], data };
    }
    if (p.dim >= first.shape.length) return undefined;
    const others = (h: Host) => h.shape.length === first.shape.length && h.shape.every((s, d) => d === p.dim || s === first.shape[d]);
    if (!children.every(others)) return undefined;
    const total = children.reduce((n, h) => n + h.shape[p.dim]!, 0);
    if (!children.every((h, c) => h.shape[p.dim] === chunk(total, children.length, c).length)) return undefined;
    return concat(children, p.dim);
  };
  return combine(0, 0);
}

/** Every per-mesh-dim output placement list for an output of `ndim` dims: R, P(sum), S(0..ndim-1) on each. */
export function candidateOutputs(ndim: number, meshNdim: number): Pl[][] {
  const one: Pl[] = [R, P, ...Array.from({ length: ndim }, (_, d) => S(d))];
  let lists: Pl[][] = [[]];
  for (let j = 0; j < meshNdim; j++) lists = lists.flatMap((l) => one.map((p) => [...l, p]));
  return lists;
}

export interface Verdict {
  /** Output placements under which the ranks' local results are the full result, over every local slicing of Replicate inputs. */
  outputs: Set<string>;
  /** The slicings that made it: inputs' placements after slicing, for the report. */
  slicings: string[];
}

/**
 * Which output placements the op can give, without communication, for inputs `full` placed as
 * `placements` (per input, per mesh dim). `op` runs on host tensors and throws ShapeError when
 * its inputs do not fit. Replicate inputs may be sliced locally to any Shard on a mesh dim where
 * another input is not Replicate.
 */
export function legalOutputs(
  op: (x: Host[]) => Host,
  full: Host[],
  placements: Pl[][],
  meshShape: readonly number[],
  split: PartialSplit,
): Verdict {
  const expected = op(full);
  const choices = placements.map((ps, k) =>
    ps.map((p, j) => {
      const othersNonR = placements.some((q, i) => i !== k && q[j]!.kind !== 'R');
      return p.kind === 'R' && othersNonR ? [R, ...full[k]!.shape.map((_, d) => S(d))] : [p];
    }),
  );
  // every combination of choices
  let combos: Pl[][][] = [[]];
  for (let k = 0; k < placements.length; k++) {
    let perInput: Pl[][] = [[]];
    for (const options of choices[k]!) perInput = perInput.flatMap((l) => options.map((p) => [...l, p]));
    combos = combos.flatMap((c) => perInput.map((p) => [...c, p]));
  }
  const size = numel(meshShape);
  const verdict: Verdict = { outputs: new Set(), slicings: [] };
  for (const sliced of combos) {
    let local: Host[];
    try {
      local = Array.from({ length: size }, (_, rank) => op(full.map((x, k) => localPiece(x, k, sliced[k]!, meshShape, rank, split))));
    } catch (err) {
      if (err instanceof ShapeError) continue;
      throw err;
    }
    for (const out of candidateOutputs(expected.shape.length, meshShape.length)) {
      const name = plsName(out);
      if (verdict.outputs.has(name)) continue;
      const whole = assemble(local, out, meshShape);
      if (whole && equalHost(whole, expected, 1e-9)) {
        verdict.outputs.add(name);
        verdict.slicings.push(`${sliced.map(plsName).join(', ')} -> ${name}`);
      }
    }
  }
  return verdict;
}

// ---- judging a combination ----------------------------------------------------------------------

export interface Draw {
  full: Host[];
  split: PartialSplit;
}

/**
 * Draws of inputs and of Partial parts, in quarters within ±20: exact in float32 through sums
 * and products, and not integers (floor of integer parts would add up like a linear op). Three
 * draws, more for tiny tensors (up to 16 for one element), where a nonlinear op can pass for
 * linear by chance: relu(a) + relu(b) = relu(a + b) whenever a and b share a sign. Inputs
 * listed in `nonzero` (divisors) avoid 0.
 */
export function drawInputs(g: Gen, shapes: number[][], seed: number, nonzero: readonly number[] = []): Draw[] {
  const count = Math.min(16, Math.max(3, Math.ceil(32 / Math.max(1, ...shapes.map(numel)))));
  return Array.from({ length: count }, (_, d) => ({
    full: shapes.map((shape, k) =>
      host(
        shape,
        Array.from({ length: numel(shape) }, () => (nonzero.includes(k) ? g.pick([-1, 1]) * g.int(1, 80) : g.int(-80, 80)) / 4),
      ),
    ),
    split: new PartialSplit(seed * 3 + d),
  }));
}

export interface Judgement {
  /** Output placement lists valid for every draw (no accident of values). */
  legal: Set<string>;
  slicings: string[];
  /**
   * Some rank's piece of some input is empty: it has nothing to contribute, so with a dim of
   * size 1 sharded (rank 0 holds it all) a combination that is no row can assemble by accident.
   */
  degenerate: boolean;
}

export function judge(op: (x: Host[]) => Host, draws: Draw[], placements: Pl[][], meshShape: readonly number[]): Judgement {
  const verdicts = draws.map(({ full, split }) => legalOutputs(op, full, placements, meshShape, split));
  const legal = new Set([...verdicts[0]!.outputs].filter((name) => verdicts.every((v) => v.outputs.has(name))));
  const size = numel(meshShape);
  const { full, split } = draws[0]!;
  const degenerate = full.some((x, k) => Array.from({ length: size }, (_, r) => localPiece(x, k, placements[k]!, meshShape, r, split).data.length === 0).some(Boolean));
  return { legal, slicings: verdicts[0]!.slicings, degenerate };
}

// ---- what the engine refuses though the math allows it ------------------------------------------

interface Listed {
  why: string;
  /** Whether this op family with these input placements (per input, per mesh dim) on this mesh is the listed case. */
  matches: (family: string, placements: Pl[][], meshShape: readonly number[]) => boolean;
}
const isR = (p: Pl | undefined) => p?.kind === 'R';

/** Legal by the math, refused by design. */
export const refusedByDesign: Listed[] = [
  {
    // one rank holds everything, so any placements assemble; the rows are checked as on a
    // larger mesh so that a program that runs on one device runs unchanged on N
    why: 'a mesh dim of size 1: every combination is trivially legal there, the rows are those of any size',
    matches: (_family, placements, meshShape) => meshShape.some((size, j) => size === 1 && placements.some((p) => !isR(p[j]))),
  },
];

/**
 * Legal by the math and refused: gaps in the engine's rows that this oracle finds. Empty: the
 * four it found (linear's (R, P[, P]) -> P, and x sliced from Replicate on the contracted dim)
 * are rows now (native/core/operators/nn.cpp); placement_oracle.test.ts keeps them as cases.
 */
export const knownMissing: Listed[] = [];

/** The reason a legal combination is refused, when it is listed. */
export function listedRefusal(family: string, placements: Pl[][], meshShape: readonly number[]): string | undefined {
  return [...refusedByDesign, ...knownMissing].find((l) => l.matches(family, placements, meshShape))?.why;
}
