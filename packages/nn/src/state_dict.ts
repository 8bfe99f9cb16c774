// Loading a module's parameters and buffers from a state dict, and gathering them back.
// From a safetensors file or sharded index, each parameter's pieces are read straight from the
// file: rank r reads only the byte runs of its own piece (a Shard on a later dim reads one run
// per row), the ranks that hold the same piece (a Replicate group) share one read, and the
// pieces become a distributed tensor through fromLocalBuffers, converted to the target dtype
// on the way. No rank ever holds a whole sharded tensor.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean } from '@dtorch/common';
import { SafetensorsCheckpoint, safetensorsDtypes } from '@dtorch/external';
import { fromSafetensorsDtype, isFloating } from './dtypes.js';
import type { Module } from './module.js';
import { sliceRuns } from './slice_runs.js';

/**
 * What loadStateDict() reads: a path to a `.safetensors` file or a sharded checkpoint's
 * `*.safetensors.index.json`, or tensors by key (a Map or a plain object, e.g. stateDict()).
 */
export type StateDictSource = string | Map<string, dt.Tensor> | Record<string, dt.Tensor>;

/** Options of Module.loadStateDict(); `strict` is torch.nn.Module.load_state_dict's. */
export interface LoadStateDictOptions {
  /**
   * true (default): any missing or unexpected key throws (InvalidArgument) before anything is
   * loaded. false: the keys both sides have are loaded, the others are listed in the result.
   */
  strict?: boolean;
  /**
   * Every floating parameter and buffer is loaded as this dtype (a parameter whose dtype changes
   * becomes a new Parameter object); integer and bool ones keep theirs. Default: each keeps its current dtype. Either way the
   * source's values are converted to the target dtype.
   */
  dtype?: dt.DType;
  /**
   * Module key -> the source's key, for the keys a checkpoint names otherwise (tied weights
   * saved under another name, a prefix the module lacks), e.g. `{ 'lm_head.weight':
   * 'shared.weight' }`; several module keys may name one source key. Unlisted keys are looked
   * up under the module's own key.
   */
  keyMap?: Readonly<Record<string, string>>;
}

/** What Module.loadStateDict() did. Under `strict` both key lists are empty (it throws otherwise). */
export interface LoadStateDictResult {
  /** Module keys (parameters and buffers) whose source key is absent; those keep their values. */
  missingKeys: string[];
  /** Source keys that no module key (after keyMap) asks for; they are not read. */
  unexpectedKeys: string[];
  /**
   * From a file: bytes of tensor data read from disk for all ranks together, each distinct
   * piece once (ranks holding the same piece, a Replicate group, share one read); 0 from a Map or object.
   */
  bytesRead: number;
  /**
   * From a file: bytes of tensor data each rank received (the sum of its pieces), indexed by
   * rank on the mesh of the module's first parameter; all zeros from a Map or object.
   */
  bytesPerRank: number[];
}

function keyReport(missing: string[], unexpected: string[]): string {
  const list = (keys: string[]) => keys.slice(0, 10).map((k) => `"${k}"`).join(', ') + (keys.length > 10 ? `, ... (${keys.length} in all)` : '');
  return [missing.length ? `missing keys ${list(missing)}` : '', unexpected.length ? `unexpected keys ${list(unexpected)}` : ''].filter(Boolean).join('; ');
}

export async function loadStateDict(module: Module, source: StateDictSource, options: Partial<LoadStateDictOptions>): Promise<LoadStateDictResult> {
  const strict = checkBoolean('loadStateDict strict', options.strict ?? true);
  const dtype = options.dtype === undefined ? undefined : dt.checkDtype(options.dtype, 'loadStateDict dtype');
  const keyMap = options.keyMap ?? {};
  if (keyMap === null || typeof keyMap !== 'object') throw new DTorchError(ErrorCode.InvalidArgument, 'loadStateDict keyMap: expected an object of module key -> source key');
  const targets = new Map<string, dt.Tensor>([...module.namedParameters(), ...module.namedBuffers()]);
  const sourceKey = (key: string) => keyMap[key] ?? key;
  let available: Set<string>;
  let checkpoint: SafetensorsCheckpoint | undefined;
  let tensors: Map<string, dt.Tensor> | undefined;
  if (typeof source === 'string') {
    checkpoint = SafetensorsCheckpoint.open(source);
    available = new Set(checkpoint.tensors.keys());
  } else if (source instanceof Map || (source !== null && typeof source === 'object' && !Array.isArray(source))) {
    tensors = source instanceof Map ? source : new Map(Object.entries(source));
    available = new Set(tensors.keys());
  } else {
    throw new DTorchError(ErrorCode.InvalidArgument, `loadStateDict: expected a path to a .safetensors file or index, or a Map of tensors, but received ${typeof source}`);
  }
  const where = checkpoint ? checkpoint.path : 'the given tensors';
  try {
    const missingKeys = [...targets.keys()].filter((k) => !available.has(sourceKey(k)));
    const wanted = new Set([...targets.keys()].map(sourceKey));
    const unexpectedKeys = [...available].filter((k) => !wanted.has(k));
    if (strict && (missingKeys.length || unexpectedKeys.length)) {
      throw new DTorchError(
        ErrorCode.InvalidArgument,
        `loadStateDict: ${where} does not match ${module.constructor.name}: ${keyReport(missingKeys, unexpectedKeys)}; fix the names or pass { strict: false }`,
      );
    }
    // every shape checked before anything is replaced: a bad source leaves the module as it was
    for (const [key, current] of targets) {
      const from = sourceKey(key);
      if (!available.has(from)) continue;
      const given = checkpoint ? checkpoint.entry(from) : tensors!.get(from);
      if (!checkpoint && !(given instanceof dt.Tensor)) throw new DTorchError(ErrorCode.InvalidArgument, `loadStateDict: "${from}" is not a Tensor`);
      checkShape(from, checkpoint ? checkpoint.entry(from).file : 'the given tensors', (given as { shape: readonly number[] }).shape, current);
    }
    const bytesPerRank = new Array<number>(module.parameters()[0]?.mesh.size ?? 1).fill(0);
    for (const [key, current] of targets) {
      const from = sourceKey(key);
      if (!available.has(from)) continue;
      const target = dtype !== undefined && isFloating(current.dtype) ? dtype : current.dtype;
      const loaded = checkpoint ? readSharded(checkpoint, from, current, target, bytesPerRank) : placeTensor(tensors!.get(from)!, current, target);
      module.setTensor(key, loaded);
    }
    return { missingKeys, unexpectedKeys, bytesRead: checkpoint?.bytesRead ?? 0, bytesPerRank };
  } finally {
    checkpoint?.close();
  }
}

function checkShape(key: string, where: string, shape: readonly number[], current: dt.Tensor): void {
  if (shape.join() !== current.shape.join()) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `loadStateDict: "${key}" is [${shape.join(', ')}] in ${where} but [${current.shape.join(', ')}] in the module`);
  }
}

// Every rank's piece of `key` read from the checkpoint (each distinct piece once).
function readSharded(checkpoint: SafetensorsCheckpoint, key: string, current: dt.Tensor, target: dt.DType, bytesPerRank: number[]): dt.Tensor {
  const entry = checkpoint.entry(key);
  const { mesh, placements } = current;
  const elementSize = safetensorsDtypes[entry.dtype];
  const byPiece = new Map<string, Uint8Array>();
  const pieces: Uint8Array[] = [];
  for (let rank = 0; rank < mesh.size; rank++) {
    const piece = dt.localPieceOf(entry.shape, placements, mesh, rank);
    const pieceKey = `${piece.offset}|${piece.shape}`;
    let bytes = byPiece.get(pieceKey);
    if (!bytes) byPiece.set(pieceKey, (bytes = checkpoint.readRuns(key, sliceRuns(entry.shape, piece, elementSize))));
    pieces.push(holdsPartialValue(mesh, placements, rank) ? bytes : new Uint8Array(bytes.byteLength));
    bytesPerRank[rank] = (bytesPerRank[rank] ?? 0) + bytes.byteLength;
  }
  return dt.fromLocalBuffers(pieces, fromSafetensorsDtype[entry.dtype], entry.shape, { mesh, placements, dtype: target });
}

// Under Partial(sum) one rank of each partial group holds the value, the others zeros (so the
// sum is the value), as the creation ops place it.
function holdsPartialValue(mesh: dt.DeviceMesh, placements: readonly dt.Placement[], rank: number): boolean {
  const coords = mesh.coordinates(rank);
  return placements.every((p, d) => !(p.isPartial() && p.reduce === 'sum') || coords[d] === 0);
}

// A tensor from a map, moved to the current tensor's mesh and placements in the target dtype.
function placeTensor(given: dt.Tensor, current: dt.Tensor, target: dt.DType): dt.Tensor {
  return dt.tidy(() => {
    const cast = given.dtype === target ? given : given.to(target);
    const placed = cast.redistribute(current.mesh, current.placements);
    // a new tensor in every case: the module owns what it holds, the caller keeps `given`
    return placed === given ? given.clone() : placed;
  });
}

/** Every parameter and buffer of `module` gathered to a replicated (full) tensor on its mesh. */
export function stateDict(module: Module): Map<string, dt.Tensor> {
  const out = new Map<string, dt.Tensor>();
  for (const [key, t] of [...module.namedParameters(), ...module.namedBuffers()]) {
    out.set(key, t.redistribute(t.placements.map(() => dt.Replicate())));
  }
  return out;
}
