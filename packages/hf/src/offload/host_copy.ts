// HostCopy: the parameters and buffers of some modules kept in host memory, so that they can leave
// their devices and come back (model CPU offload, group offloading).
//
// Tensors move within the engine, their bytes copied between the devices by the workers as they
// lie (bfloat16 stays bfloat16; from a GPU into pinned memory, and back without waiting), without
// a read into JavaScript or a wait: offloading only records the move. A tensor whole on every rank
// (one device, or replicated: every weight of a sequence-parallel or data-parallel mesh) is
// redistributed onto the host's CPU device (cpu:0) and back, copied once however many ranks hold
// it. A sharded one (a tensor-parallel weight) moves piece by piece onto CPU devices 0.. laid out
// in its mesh's shape, its placements kept (the engine's transfer_pieces: each rank's piece to
// the host device of its index, no rank ever gathers the whole), and back.
// A sharded tensor on CPU devices that overlap those (CPU meshes in tests) is kept as each rank's
// own piece instead (ranks that hold the same piece share one buffer), read once with toLocal,
// and made again with dt.fromLocalBuffers on its mesh with its placements.
//
// Offloaded, a parameter is disposed and its module keeps the disposed object (its shape, dtype
// and mesh are still readable); onload() installs a new Parameter in every slot that held it (tied
// weights stay tied). Weights are read-only in inference: a tensor still the one onload() made is
// dropped without a read; one that changed or appeared since (a LoRA adapter, fused weights) is
// read back first, so the host copy is always what the module last held.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

// One tensor in host memory: a tensor on the host's CPU device (HOST), or its pieces in
// JavaScript; and how to make it again.
type HostTensor = EngineHosted | HostPieces;

interface EngineHosted {
  readonly tensor: dt.Tensor;
  readonly mesh: dt.DeviceMesh;
  readonly placements: readonly dt.Placement[];
}

interface HostPieces {
  readonly pieces: Uint8Array[];
  // the pieces' dtype: bfloat16 narrowed exactly from the read's float32; other 16- and 8-bit
  // floats stay float32 (exact too) and are converted back as they are made
  readonly source: dt.DType;
  readonly shape: readonly number[];
  readonly dtype: dt.DType;
  readonly mesh: dt.DeviceMesh;
  readonly placements: readonly dt.Placement[];
}

// Where one tensor lives in the modules: every (owner, property) that holds it, a buffer or not.
interface Slot {
  readonly places: { owner: nn.Module; name: string }[];
  readonly buffer: boolean;
}

// What the slot held when last made or read: unchanged since, it needs no read to leave.
interface Known {
  readonly host: HostTensor;
  tensor: dt.Tensor;
  id: number;
}

/** The tensors of `modules` in host memory, to move them off their devices and back. */
export class HostCopy {
  readonly #modules: readonly nn.Module[];
  // by the first place's "path" within this copy's modules (module index and dotted key)
  readonly #known = new Map<string, Known>();

  /** `modules`: what moves together (one model, or a group of blocks). */
  constructor(modules: readonly nn.Module[]) {
    this.#modules = modules;
  }

  /** Whether every tensor of the modules is on its devices now. */
  get onDevice(): boolean {
    return [...this.#slots().values()].every((slot) => !tensorOf(slot).isDisposed);
  }

  /** Bytes of the tensors kept in host memory (each shared piece once). */
  get hostBytes(): number {
    const seen = new Set<Uint8Array>();
    let bytes = 0;
    for (const { host } of this.#known.values()) {
      if ('tensor' in host) {
        bytes += host.tensor.nbytes;
        continue;
      }
      for (const piece of host.pieces) {
        if (!seen.has(piece)) bytes += piece.byteLength;
        seen.add(piece);
      }
    }
    return bytes;
  }

  /**
   * Reads every tensor of the modules not kept yet (or changed since) into host memory, all at
   * once, then drops them from their devices: what enabling offloading does first.
   */
  async offloadAll(): Promise<void> {
    const slots = this.#slots();
    const reads: Promise<void>[] = [];
    for (const [key, slot] of slots) {
      const tensor = tensorOf(slot);
      if (tensor.isDisposed || this.#unchanged(key, tensor)) continue;
      if (movesInEngine(tensor)) this.#keep(key, toHost(tensor), tensor);
      else reads.push(readPieces(tensor).then((host) => this.#keep(key, host, tensor)));
    }
    await Promise.all(reads);
    this.#forgetGone(slots);
    for (const slot of slots.values()) tensorOf(slot).dispose();
  }

  /**
   * Drops the modules' tensors from their devices, now: those onload() made are released (frees
   * run after the queued work that reads them); one changed or added since is read back first,
   * waiting for the devices (a LoRA fused into a weight between moves).
   */
  offload(): void {
    const slots = this.#slots();
    for (const [key, slot] of slots) {
      const tensor = tensorOf(slot);
      if (tensor.isDisposed) continue;
      if (!this.#unchanged(key, tensor)) this.#keep(key, movesInEngine(tensor) ? toHost(tensor) : readPiecesSync(tensor), tensor);
      tensor.dispose();
    }
    this.#forgetGone(slots);
  }

  /** Makes every offloaded tensor again on its mesh from host memory, recorded now; returns how many. */
  onload(): number {
    let made = 0;
    for (const [key, slot] of this.#slots()) {
      const known = this.#known.get(key);
      if (!known || !tensorOf(slot).isDisposed) continue;
      const { host } = known;
      const value =
        'tensor' in host
          ? dt.keep(host.tensor.redistribute(host.mesh, host.placements))
          : dt.fromLocalBuffers(host.pieces, host.source, host.shape, { mesh: host.mesh, placements: host.placements, dtype: host.dtype });
      const tensor = slot.buffer ? value : new nn.Parameter(value);
      for (const { owner, name } of slot.places) {
        if (slot.buffer) owner.setTensor(name, tensor);
        else (owner as unknown as Record<string, unknown>)[name] = tensor;
      }
      known.tensor = tensor;
      known.id = tensor.id;
      made++;
    }
    return made;
  }

  /**
   * Takes the tensors on the devices now as what host memory holds, without reading them: after a
   * step that only moved the values onload() made (packing projections into one buffer).
   */
  sameValues(): void {
    for (const [key, slot] of this.#slots()) {
      const known = this.#known.get(key);
      const tensor = tensorOf(slot);
      if (known && !tensor.isDisposed) {
        known.tensor = tensor;
        known.id = tensor.id;
      }
    }
  }

  /** Forgets the host copies (the modules keep what is on their devices). */
  clear(): void {
    for (const { host } of this.#known.values()) release(host);
    this.#known.clear();
  }

  #unchanged(key: string, tensor: dt.Tensor): boolean {
    const known = this.#known.get(key);
    return known !== undefined && known.tensor === tensor && known.id === tensor.id;
  }

  // `host` as what slot `key` holds, read from `tensor` (the copy it replaces released)
  #keep(key: string, host: HostTensor, tensor: dt.Tensor): void {
    const old = this.#known.get(key);
    if (old) release(old.host);
    this.#known.set(key, { host, tensor, id: tensor.id });
  }

  // host copies of tensors the modules no longer hold (an adapter deleted)
  #forgetGone(slots: Map<string, Slot>): void {
    for (const [key, { host }] of this.#known) {
      if (slots.has(key)) continue;
      release(host);
      this.#known.delete(key);
    }
  }

  // Every parameter and buffer of the modules, each tensor once with all the places that hold it.
  #slots(): Map<string, Slot> {
    const slots = new Map<string, Slot>();
    const byTensor = new Map<dt.Tensor, Slot>();
    this.#modules.forEach((root, i) => {
      const buffers = new Set([...root.namedBuffers()].map(([, t]) => t));
      for (const [path, owner] of root.namedModules()) {
        for (const [name, value] of Object.entries(owner)) {
          if (!(value instanceof dt.Tensor) || !(value instanceof nn.Parameter || buffers.has(value))) continue;
          const place = { owner, name };
          const slot = byTensor.get(value);
          if (slot) slot.places.push(place);
          else {
            const made: Slot = { places: [place], buffer: !(value instanceof nn.Parameter) };
            byTensor.set(value, made);
            slots.set(`${i}:${path ? `${path}.${name}` : name}`, made);
          }
        }
      }
    });
    return slots;
  }
}

function tensorOf(slot: Slot): dt.Tensor {
  const { owner, name } = slot.places[0]!;
  return (owner as unknown as Record<string, dt.Tensor>)[name]!;
}

// The host's CPU device, where whole tensors wait (made once: a mesh is a handle).
let hostMesh: dt.DeviceMesh | undefined;
const HOST = (): dt.DeviceMesh => (hostMesh ??= new dt.DeviceMesh('cpu', [0]));

// Where a sharded tensor's pieces wait: CPU devices 0.. in the shape of its mesh (one per shape).
const pieceHosts = new Map<string, dt.DeviceMesh>();
function piecesHost(mesh: dt.DeviceMesh): dt.DeviceMesh {
  const key = mesh.shape.join('x');
  let host = pieceHosts.get(key);
  if (!host) pieceHosts.set(key, (host = dt.initDeviceMesh('cpu', mesh.shape)));
  return host;
}

const whole = (t: dt.Tensor): boolean => t.placements.every((p) => p.isReplicate());

// Whether `t` moves within the engine: not already on the devices its host copy would take.
function movesInEngine(t: dt.Tensor): boolean {
  if (t.mesh.deviceType !== 'cpu') return true;
  return whole(t) ? !t.mesh.devices.includes(0) : t.mesh.devices.every((d) => d >= t.mesh.size);
}

// `t` copied into host memory, recorded now (the copy runs after the work before it).
function toHost(t: dt.Tensor): EngineHosted {
  const tensor = whole(t) ? t.redistribute(HOST(), [dt.Replicate()]) : t.redistribute(piecesHost(t.mesh), t.placements);
  return { tensor: dt.keep(tensor), mesh: t.mesh, placements: t.placements };
}

function release(host: HostTensor): void {
  if ('tensor' in host) host.tensor.dispose();
}

// Each rank's piece of `t`; ranks that hold the same piece (a Replicate dim) read it once.
function pieceGroups(t: dt.Tensor): number[][] {
  const partial = t.placements.some((p) => p.isPartial());
  const groups = new Map<string, number[]>();
  for (let rank = 0; rank < t.mesh.size; rank++) {
    const piece = dt.localPieceOf(t.shape, t.placements, t.mesh, rank);
    const key = partial ? `${rank}` : `${piece.offset.join()}|${piece.shape.join()}`;
    const group = groups.get(key);
    if (group) group.push(rank);
    else groups.set(key, [rank]);
  }
  return [...groups.values()];
}

async function readPieces(t: dt.Tensor): Promise<HostPieces> {
  const groups = pieceGroups(t);
  const arrays = await Promise.all(groups.map((ranks) => readLocal(t, ranks[0]!, (local) => local.data())));
  return hostTensor(t, groups, arrays);
}

function readPiecesSync(t: dt.Tensor): HostPieces {
  const groups = pieceGroups(t);
  return hostTensor(t, groups, groups.map((ranks) => readLocal(t, ranks[0]!, (local) => local.dataSync())));
}

function readLocal<R>(t: dt.Tensor, rank: number, read: (local: dt.Tensor) => R): R {
  const local = t.toLocal(rank);
  try {
    return read(local);
  } finally {
    local.dispose(); // its read is recorded: the value stays until it is delivered
  }
}

function hostTensor(t: dt.Tensor, groups: number[][], arrays: HostArray[]): HostPieces {
  const source: dt.DType = t.dtype === 'bfloat16' ? 'bfloat16' : WIDENED.has(t.dtype) ? 'float32' : t.dtype;
  const pieces: Uint8Array[] = new Array<Uint8Array>(t.mesh.size);
  groups.forEach((ranks, i) => {
    const bytes = source === 'bfloat16' ? narrowToBfloat16(arrays[i] as Float32Array) : new Uint8Array(arrays[i]!.buffer, arrays[i]!.byteOffset, arrays[i]!.byteLength);
    for (const rank of ranks) pieces[rank] = bytes;
  });
  return { pieces, source, shape: t.shape, dtype: t.dtype, mesh: t.mesh, placements: t.placements };
}

// what a read gives
type HostArray = ReturnType<dt.Tensor['dataSync']>;

// reads give these as float32 (exactly)
const WIDENED = new Set<dt.DType>(['float16', 'float8_e4m3fn', 'float8_e5m2']);

// A bfloat16 is the high half of its float32: a read widened exactly, so this is exact too.
function narrowToBfloat16(values: Float32Array): Uint8Array {
  const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const halves = new Uint16Array(values.length);
  for (let i = 0; i < words.length; i++) halves[i] = words[i]! >>> 16;
  return new Uint8Array(halves.buffer);
}
