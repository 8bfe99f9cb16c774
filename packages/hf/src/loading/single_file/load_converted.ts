// Loads a model from a single-file checkpoint through a ConversionPlan, without a converted copy
// of the checkpoint: keys that are renamed go through nn's state-dict loader (keyMap), each rank
// reading only its slice; keys made of rows (a fused qkv split, adaLN halves swapped) are read
// the same way, each rank's piece as byte runs of the rows it holds, so no tensor is ever whole
// in memory unless the mesh replicates it (as the loader does for any tensor).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, log } from '@dtorch/common';
import { SafetensorsCheckpoint, safetensorsDtypes, type CheckpointTensor } from '@dtorch/external';
import { sourceKeys, type ConversionPlan, type RowSlice } from './conversion_plan.js';
import type { SingleFileCheckpoint } from './single_file_checkpoint.js';
import { fp8AuxiliaryKeys, prepareFp8Checkpoint } from '../fp8_checkpoint.js';

/**
 * Loads every parameter and buffer of `model` from `file` as `plan` says. Every source is
 * checked (present, of the module's shape, one dtype per key) before anything is read, so a bad
 * file leaves the model as it was. `what` names the caller in messages.
 */
export async function loadConverted(model: nn.Module, file: SingleFileCheckpoint, plan: ConversionPlan, what: string): Promise<void> {
  // linears whose weights the file holds in FP8 (ComfyUI's scaled FP8, Kijai's casts) take their
  // FP8 form first; their scales are read after the weights (fp8_checkpoint.ts)
  const fp8 = prepareFp8Checkpoint(model, file.path, (path) => {
    const source = plan.get(`${path}.weight`);
    if (source === undefined || !sourceKeys(source).every((k) => file.has(k))) return undefined;
    return typeof source === 'string' ? [{ key: file.prefix + source, from: 0, rows: file.shape(source)[0]! }] : source.map((s) => ({ ...s, key: file.prefix + s.key }));
  });
  const targets = [...model.namedParameters(), ...model.namedBuffers()].filter(([key]) => !fp8.ownKeys.has(key));
  const lacking = new Set<string>();
  for (const [key] of targets) {
    const source = plan.get(key);
    if (source === undefined) throw new DTorchError(ErrorCode.BadConfig, `${what}: the model's config asks for "${key}", which ${file.path} does not provide; check options.config`);
    for (const k of sourceKeys(source)) if (!file.has(k)) lacking.add(k);
  }
  if (lacking.size) throw file.lacks([...lacking]);
  for (const [key, current] of targets) checkSource(file, key, plan.get(key)!, current);

  // renamed keys: the state-dict loader under keyMap; row-made keys map to no key (left missing) and are read below
  const keyMap: Record<string, string> = {};
  for (const [key] of targets) {
    const source = plan.get(key)!;
    keyMap[key] = typeof source === 'string' ? file.prefix + source : `\0rows of ${key}`;
  }
  await model.loadStateDict(file.path, { strict: false, keyMap });
  const checkpoint = SafetensorsCheckpoint.open(file.path);
  try {
    for (const [key, current] of targets) {
      const source = plan.get(key)!;
      if (typeof source !== 'string') model.setTensor(key, readRows(checkpoint, file.prefix, source, current));
    }
  } finally {
    checkpoint.close();
  }

  fp8.finish();
  const used = new Set([...plan.values()].flatMap(sourceKeys));
  const unused = [...file.tensors.keys()].filter((k) => !used.has(k) && !(fp8.count && fp8AuxiliaryKeys.some((re) => re.test(k))));
  if (unused.length) log.warn(`${what}: ${file.path} has ${unused.length} tensors the model does not use (ignored): ${unused.slice(0, 5).join(', ')}`);
}

// A source fits the module's tensor: a whole tensor of its shape, or row slices inside their
// tensors, of its trailing shape, adding up to its rows, all of one dtype.
function checkSource(file: SingleFileCheckpoint, key: string, source: string | readonly RowSlice[], current: dt.Tensor): void {
  const want = current.shape;
  const mismatch = (got: string) => new DTorchError(ErrorCode.ShapeMismatch, `${file.path}: "${key}" of the model is [${want.join(', ')}] but the file gives ${got}; the file and the config do not belong together`);
  if (typeof source === 'string') {
    const shape = file.shape(source);
    if (shape.join() !== want.join()) throw mismatch(`[${shape.join(', ')}] ("${file.prefix}${source}")`);
    return;
  }
  let rows = 0;
  const dtypes = new Set<string>();
  for (const slice of source) {
    const shape = file.shape(slice.key);
    dtypes.add(file.tensors.get(slice.key)!.dtype);
    if (slice.from < 0 || slice.rows < 0 || slice.from + slice.rows > (shape[0] ?? 0) || shape.slice(1).join() !== want.slice(1).join()) {
      throw mismatch(`rows ${slice.from}..${slice.from + slice.rows} of [${shape.join(', ')}] ("${file.prefix}${slice.key}")`);
    }
    rows += slice.rows;
  }
  if (rows !== want[0]) throw mismatch(`${rows} rows`);
  if (dtypes.size > 1) throw new DTorchError(ErrorCode.BadFile, `${file.path}: the parts of "${key}" have different dtypes (${[...dtypes].join(', ')})`);
}

// The tensor of `slices` stacked by rows, placed as `current` (its mesh, placements and dtype):
// each rank's piece is read as the byte runs of the rows it holds from each slice, in order;
// ranks that hold the same piece (a Replicate group) share one read.
function readRows(checkpoint: SafetensorsCheckpoint, prefix: string, slices: readonly RowSlice[], current: dt.Tensor): dt.Tensor {
  const { mesh, placements, shape } = current;
  const entries: CheckpointTensor[] = slices.map((s) => checkpoint.entry(prefix + s.key));
  const dtype = entries[0]!.dtype;
  const elementSize = safetensorsDtypes[dtype];
  const byPiece = new Map<string, Uint8Array>();
  const pieces: Uint8Array[] = [];
  for (let rank = 0; rank < mesh.size; rank++) {
    const piece = dt.localPieceOf(shape, placements, mesh, rank);
    const pieceKey = `${piece.offset}|${piece.shape}`;
    let bytes = byPiece.get(pieceKey);
    if (!bytes) byPiece.set(pieceKey, (bytes = readPiece(checkpoint, slices, entries, piece, elementSize)));
    pieces.push(holdsPartialValue(mesh, placements, rank) ? bytes : new Uint8Array(bytes.byteLength));
  }
  return dt.fromLocalBuffers(pieces, nn.fromSafetensorsDtype[dtype], shape, { mesh, placements, dtype: current.dtype });
}

// One piece (a box of the stacked tensor): its rows cut along the slices, each part read as the
// runs of the same box inside the slice's tensor, row-major, so the parts join end to end.
function readPiece(checkpoint: SafetensorsCheckpoint, slices: readonly RowSlice[], entries: readonly CheckpointTensor[], piece: dt.LocalPiece, elementSize: number): Uint8Array {
  const [start, count] = [piece.offset[0] ?? 0, piece.shape[0] ?? 0];
  const parts: Uint8Array[] = [];
  let at = 0; // the first row of the slice in the stacked tensor
  slices.forEach((slice, i) => {
    const [lo, hi] = [Math.max(start, at), Math.min(start + count, at + slice.rows)];
    if (lo < hi) {
      const box = { offset: [slice.from + lo - at, ...piece.offset.slice(1)], shape: [hi - lo, ...piece.shape.slice(1)] };
      parts.push(checkpoint.readRuns(entries[i]!.name, nn.sliceRuns(entries[i]!.shape, box, elementSize)));
    }
    at += slice.rows;
  });
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

// Under Partial(sum) one rank of each partial group holds the value, the others zeros (as nn's loader places it).
function holdsPartialValue(mesh: dt.DeviceMesh, placements: readonly dt.Placement[], rank: number): boolean {
  const coords = mesh.coordinates(rank);
  return placements.every((p, d) => !(p.isPartial() && p.reduce === 'sum') || coords[d] === 0);
}
