// DeviceMesh: an N-D arrangement of devices of one kind, from a flat or nested array
// (`new DeviceMesh('cpu', [[0, 1], [2, 3]], ['dp', 'tp'])`). Creating one starts a worker
// thread for each device not yet in use.
import { DTorchError, ErrorCode, describeValue, isInteger } from '@dtorch/common';
import { engine, type DeviceKind } from '@dtorch/core';

/**
 * The devices of a {@link DeviceMesh}: a device index, or arrays of them nested one level per mesh
 * dim, every row of a level the same length (`[[0, 1], [2, 3]]` is a 2 x 2 mesh).
 */
export type Nested = number | readonly Nested[];

const MAX_DEVICE_INDEX = 2 ** 31 - 1;
const MAX_MESH_DEVICES = 2 ** 16;

function flatten(devices: Nested, where: string, shape: number[], depth: number, out: number[]): void {
  if (typeof devices === 'number') {
    // device indices cross to native as int32: a larger one would wrap onto another device
    if (!isInteger(devices) || devices < 0 || devices > MAX_DEVICE_INDEX) {
      throw new DTorchError(ErrorCode.InvalidMesh, `device ${where} is ${describeValue(devices)}; device indices are integers in [0, ${MAX_DEVICE_INDEX}]`);
    }
    if (depth !== shape.length) {
      throw new DTorchError(ErrorCode.InvalidMesh, `ragged device nesting: ${where} is a device at depth ${depth}, but the mesh has ${shape.length} dims`);
    }
    out.push(devices);
    return;
  }
  if (!Array.isArray(devices)) {
    throw new DTorchError(ErrorCode.InvalidMesh, `Expected a device index or an array of them at ${where} but received ${describeValue(devices)}`);
  }
  if (depth === shape.length) shape.push(devices.length);
  else if (shape[depth] !== devices.length) {
    throw new DTorchError(
      ErrorCode.InvalidMesh,
      `ragged device nesting: ${where} has ${devices.length} entries but its siblings have ${shape[depth]}; every row of a mesh has the same length`,
    );
  }
  devices.forEach((d: Nested, i: number) => flatten(d, `${where}[${i}]`, shape, depth + 1, out));
}

/**
 * An N-D arrangement of devices of one kind, as torch's DeviceMesh: `new DeviceMesh('cpu', [[0, 1],
 * [2, 3]], ['dp', 'tp'])` is a 2 x 2 mesh of CPU devices 0..3 with mesh dims named 'dp' and 'tp'.
 * A tensor has one {@link Placement} per mesh dim. Ranks number the devices in row-major order
 * (rank 1 is device 1 here). Meshes are frozen; creating one starts a worker thread for each
 * device not yet in use. {@link initDeviceMesh} builds one from a shape.
 */
export class DeviceMesh {
  /** The kind of every device of the mesh: 'cpu' or 'cuda'. */
  readonly deviceType: DeviceKind;
  /** Device index of each rank, row-major. */
  readonly devices: readonly number[];
  /** Number of devices along each mesh dim ([n] for a flat list, [1] for a single device index). */
  readonly shape: readonly number[];
  /** The names of the mesh dims, one per dim, as given; undefined when none were given. */
  readonly dimNames: readonly string[] | undefined;
  /** Engine id of this mesh. */
  readonly id: number;

  /**
   * @param deviceType - 'cpu' or 'cuda'.
   * @param devices - Device indices, nested one array level per mesh dim; each device at most once.
   * @param dimNames - Distinct, non-empty names, one per mesh dim.
   * @throws INVALID_MESH for ragged nesting, repeated or invalid device indices, or bad dim names.
   */
  constructor(deviceType: DeviceKind, devices: Nested, dimNames?: readonly string[]) {
    if (deviceType !== 'cpu' && deviceType !== 'cuda') {
      throw new DTorchError(ErrorCode.InvalidMesh, `Expected 'cpu' or 'cuda' for device type but received ${describeValue(deviceType)}`);
    }
    const shape: number[] = [];
    const flat: number[] = [];
    flatten(devices, 'devices', shape, 0, flat);
    if (flat.length === 0) throw new DTorchError(ErrorCode.InvalidMesh, 'a device mesh needs at least one device');
    if (shape.length === 0) shape.push(1); // a single device index: a 1-device mesh
    const seen = new Set<number>();
    for (const d of flat) {
      if (seen.has(d)) {
        throw new DTorchError(ErrorCode.InvalidMesh, `device ${d} appears more than once in ${describeValue(flat)}; each device holds one rank`);
      }
      seen.add(d);
    }
    if (dimNames !== undefined) {
      if (!Array.isArray(dimNames) || dimNames.length !== shape.length || !dimNames.every((n) => typeof n === 'string' && n.length > 0)) {
        throw new DTorchError(
          ErrorCode.InvalidMesh,
          `Expected ${shape.length} dim name(s) (one per mesh dim of shape [${shape.join(', ')}]) but received ${describeValue(dimNames)}`,
        );
      }
      if (new Set(dimNames).size !== dimNames.length) {
        throw new DTorchError(ErrorCode.InvalidMesh, `mesh dim names must be distinct, got ${describeValue(dimNames)}`);
      }
    }
    this.deviceType = deviceType;
    this.devices = Object.freeze(flat);
    this.shape = Object.freeze(shape);
    this.dimNames = dimNames ? Object.freeze([...dimNames]) : undefined;
    this.id = engine().createMesh(deviceType, flat, shape);
    Object.freeze(this);
  }

  /** Number of mesh dims. */
  get ndim(): number {
    return this.shape.length;
  }

  /** Number of devices (ranks) in the mesh. */
  get size(): number {
    return this.devices.length;
  }

  /** Coordinates of `rank` on each mesh dim (row-major ranks). */
  coordinates(rank: number): number[] {
    const coords = new Array<number>(this.ndim);
    let rest = rank;
    for (let d = this.ndim - 1; d >= 0; d--) {
      coords[d] = rest % this.shape[d]!;
      rest = Math.floor(rest / this.shape[d]!);
    }
    return coords;
  }

  /**
   * The 1-D sub-meshes along the dim named `dimName` (or dim index): one per combination of the
   * other dims' coordinates, in rank order. For a ['dp', 'tp'] mesh of [[0, 1], [2, 3]],
   * get('tp') gives the meshes [0, 1] and [2, 3]; get('dp') gives [0, 2] and [1, 3]. Each is a
   * new 1-D DeviceMesh of the same device type, named after the dim when the mesh has names.
   * Throws INVALID_MESH for a dim the mesh does not have.
   */
  get(dimName: string | number): DeviceMesh[] {
    const dim = typeof dimName === 'number' ? dimName : (this.dimNames ?? []).indexOf(dimName);
    if (!isInteger(dim) || dim < 0 || dim >= this.ndim) {
      const names = this.dimNames ? `: ${this.dimNames.map((n) => `'${n}'`).join(', ')}` : ' (it has no dim names)';
      throw new DTorchError(ErrorCode.InvalidMesh, `mesh dim ${describeValue(dimName)} is not a dim of ${this}${names}`);
    }
    const groups = new Map<string, number[]>();
    this.devices.forEach((device, rank) => {
      const coords = this.coordinates(rank);
      coords[dim] = -1;
      const key = coords.join();
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key)!.push(device);
    });
    const name = this.dimNames?.[dim];
    return [...groups.values()].map((devices) => new DeviceMesh(this.deviceType, devices, name ? [name] : undefined));
  }

  /** Whether `other` is the same mesh: same device type, the same devices in the same order, same shape and dim names (it may be another object). */
  equals(other: DeviceMesh): boolean {
    return (
      this === other ||
      (this.deviceType === other.deviceType &&
        this.devices.join() === other.devices.join() &&
        this.shape.join() === other.shape.join() &&
        (this.dimNames ?? []).join() === (other.dimNames ?? []).join())
    );
  }

  /** The mesh as a constructor call, with its shape when it has more than one dim, e.g. `DeviceMesh('cpu', [0, 1, 2, 3], ['dp', 'tp']) shape=[2, 2]`. */
  toString(): string {
    const names = this.dimNames ? `, [${this.dimNames.map((n) => `'${n}'`).join(', ')}]` : '';
    const shape = this.ndim > 1 ? ` shape=[${this.shape.join(', ')}]` : '';
    return `DeviceMesh('${this.deviceType}', [${this.devices.join(', ')}]${names})${shape}`;
  }
}

/** A mesh of devices 0..N-1 laid out in `shape`, as torch's init_device_mesh. */
export function initDeviceMesh(deviceType: DeviceKind, shape: readonly number[], dimNames?: readonly string[]): DeviceMesh {
  if (!Array.isArray(shape) || shape.length === 0 || !shape.every((s) => isInteger(s) && s > 0)) {
    throw new DTorchError(ErrorCode.InvalidMesh, `Expected a mesh shape of positive integers but received ${describeValue(shape)}`);
  }
  // before its index array is built: no process has that many devices (DTORCH_CPU_DEVICES <= 1024)
  const size = shape.reduce((a, b) => a * b, 1);
  if (size > MAX_MESH_DEVICES) {
    throw new DTorchError(ErrorCode.InvalidMesh, `a mesh of shape ${describeValue(shape)} has ${size} devices; a mesh has at most ${MAX_MESH_DEVICES}`);
  }
  let next = 0;
  const build = (dim: number): Nested => (dim === shape.length ? next++ : Array.from({ length: shape[dim]! }, () => build(dim + 1)));
  return new DeviceMesh(deviceType, build(0), dimNames);
}

let defaultMeshInstance: DeviceMesh | undefined;

/** The mesh used when none is given: one CPU device. */
export function defaultMesh(): DeviceMesh {
  defaultMeshInstance ??= new DeviceMesh('cpu', [0]);
  return defaultMeshInstance;
}
