// Moving a tensor between a device's mesh and the host's CPU device (what offloading does with a
// one-device weight, @dtorch/hf HostCopy): redistribute onto a CPU mesh and back, the bits and
// the dtype as they were, the host copy counted on its CPU device. From a GPU the sender copies
// into pinned host memory on its read stream and the move back copies from it without waiting
// (native core/operators/redistribute.cpp, transfer); the GPU cases are skipped without CUDA.
// A sharded tensor (a tensor-parallel weight) moves to a mesh of the same shape piece by piece,
// each rank's piece to the rank of its index (transfer_pieces): nothing is gathered.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const host = new dt.DeviceMesh('cpu', [0]);
const hostBytes = () => dt.memory().perDevice.find((p) => p.device === 'cpu:0')?.numBytes ?? 0;

async function roundTrip(mesh: dt.DeviceMesh, placements: dt.Placement[]): Promise<void> {
  for (const dtype of ['bfloat16', 'float32'] as const) {
    const x = dt.randn([3, 40, 24], { seed: 5, mesh, placements, dtype });
    const want = await x.to('float32').data();
    await dt.sync();
    const before = hostBytes();
    const onHost = x.redistribute(host, [dt.Replicate()]);
    await dt.sync();
    expect(onHost.dtype).toBe(dtype);
    expect(hostBytes() - before).toBe(x.nbytes);
    expect(await onHost.to('float32').data()).toEqual(want);
    const back = onHost.redistribute(mesh, placements);
    expect(back.placements).toEqual(placements);
    expect(await back.to('float32').data()).toEqual(want);
    // the moves in a row, nothing read in between: what offloading records
    const again = x.redistribute(host, [dt.Replicate()]).redistribute(mesh, placements);
    expect(await again.to('float32').data()).toEqual(want);
    dt.dispose([x, onHost, back, again]);
  }
}

const bytesOn = (device: string) => dt.memory().perDevice.find((p) => p.device === device);

// `x` on `mesh` with `placements` moved to `target` (same shape) with `targetPlacements`, and back:
// the same values; with the placements kept, each target device holds its piece, and no source
// device allocated more than its piece on the way (a gather would have held the whole tensor).
// the full value in float32 (a partial sum is summed first: a cast does not take one)
const valuesOf = (t: dt.Tensor) => dt.tidy(() => t.redistribute(t.placements.map(() => dt.Replicate())).to('float32')).data();

async function piecesRoundTrip(mesh: dt.DeviceMesh, placements: dt.Placement[], target: dt.DeviceMesh, targetPlacements = placements): Promise<void> {
  for (const dtype of ['bfloat16', 'float32'] as const) {
    const source = dt.tidy(() => dt.randn([6, 40, 24], { seed: 9, mesh, dtype }).redistribute(placements));
    const want = await valuesOf(source);
    await dt.sync();
    const devices = (m: dt.DeviceMesh) => m.devices.map((d) => `${m.deviceType}:${d}`);
    const before = devices(target).map((d) => bytesOn(d)?.numBytes ?? 0);
    dt.resetPeakMemory();
    const held = devices(mesh).map((d) => bytesOn(d)!.allocatedBytes);
    const moved = source.redistribute(target, targetPlacements);
    await dt.sync();
    expect(moved.mesh.equals(target)).toBe(true);
    expect(moved.placements).toEqual(targetPlacements);
    expect(moved.dtype).toBe(dtype);
    devices(mesh).forEach((d, r) => {
      // its piece once more at most (a contiguous copy to send), never the whole tensor
      expect(bytesOn(d)!.peakBytes - held[r]!, `${d}'s peak`).toBeLessThanOrEqual(source.localShape(r).reduce((a, b) => a * b, 1) * (dtype === 'float32' ? 4 : 2));
    });
    if (targetPlacements === placements) {
      devices(target).forEach((d, r) => {
        const piece = moved.localShape(r).reduce((a, b) => a * b, 1) * (dtype === 'float32' ? 4 : 2);
        expect((bytesOn(d)?.numBytes ?? 0) - before[r]!, `${d} holds rank ${r}'s piece`).toBe(piece);
      });
    }
    expect(await valuesOf(moved)).toEqual(want);
    const back = moved.redistribute(mesh, placements);
    expect(back.placements).toEqual(placements);
    expect(await valuesOf(back)).toEqual(want);
    dt.dispose([source, moved, back]);
  }
}

describe('moves between a device and the host', () => {
  it('cpu:1 to cpu:0 and back: the same bits and dtype, the copy on cpu:0', async () => {
    await roundTrip(new dt.DeviceMesh('cpu', [1]), [dt.Replicate()]);
  });

  it('a tensor sharded over cpu:1,2 to cpu:0 (gathered) and back to its shards', async () => {
    await roundTrip(new dt.DeviceMesh('cpu', [1, 2], ['tp']), [dt.Shard(1)]);
  });

  it('a tensor sharded over cpu:2,3 to cpu:0,1 piece by piece, nothing gathered, and back', async () => {
    await piecesRoundTrip(new dt.DeviceMesh('cpu', [2, 3], ['tp']), [dt.Shard(1)], new dt.DeviceMesh('cpu', [0, 1], ['tp']));
  });

  it('a 2 x 2 mesh\'s pieces (sharded, replicated and partial) to another 2 x 2 mesh and back', async () => {
    const mesh = new dt.DeviceMesh('cpu', [[4, 5], [6, 7]], ['dp', 'tp']);
    const target = dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']);
    await piecesRoundTrip(mesh, [dt.Replicate(), dt.Shard(2)], target);
    await piecesRoundTrip(mesh, [dt.Shard(0), dt.Partial()], target);
  });

  it('pieces moved to a mesh of the same shape then take the placements asked for there', async () => {
    await piecesRoundTrip(new dt.DeviceMesh('cpu', [2, 3]), [dt.Shard(1)], new dt.DeviceMesh('cpu', [0, 1]), [dt.Replicate()]);
  });

  const one = cudaSkip(1);
  it.skipIf(one)(`cuda:0 to cpu:0 and back: the same bits and dtype, through pinned memory${skipNote(one)}`, async () => {
    await roundTrip(cudaMesh(1), [dt.Replicate()]);
  });

  it.skipIf(one)(`a tensor sharded on a one-GPU mesh to a CPU mesh piece by piece, through pinned memory, and back${skipNote(one)}`, async () => {
    await piecesRoundTrip(cudaMesh(1), [dt.Shard(1)], new dt.DeviceMesh('cpu', [0]));
  });

  const two = cudaSkip(2);
  it.skipIf(two)(`a tensor sharded over two GPUs to cpu:0 and back to its shards${skipNote(two)}`, async () => {
    await roundTrip(cudaMesh(2, ['tp']), [dt.Shard(1)]);
  });
});
