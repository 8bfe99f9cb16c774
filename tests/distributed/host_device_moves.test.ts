// Moving a tensor between a device's mesh and the host's CPU device (what offloading does with a
// one-device weight, @dtorch/hf HostCopy): redistribute onto a CPU mesh and back, the bits and
// the dtype as they were, the host copy counted on its CPU device. From a GPU the sender copies
// into pinned host memory on its read stream and the move back copies from it without waiting
// (native core/operators/redistribute.cpp, transfer); the GPU cases are skipped without CUDA.
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

describe('moves between a device and the host', () => {
  it('cpu:1 to cpu:0 and back: the same bits and dtype, the copy on cpu:0', async () => {
    await roundTrip(new dt.DeviceMesh('cpu', [1]), [dt.Replicate()]);
  });

  it('a tensor sharded over cpu:1,2 to cpu:0 (gathered) and back to its shards', async () => {
    await roundTrip(new dt.DeviceMesh('cpu', [1, 2], ['tp']), [dt.Shard(1)]);
  });

  const one = cudaSkip(1);
  it.skipIf(one)(`cuda:0 to cpu:0 and back: the same bits and dtype, through pinned memory${skipNote(one)}`, async () => {
    await roundTrip(cudaMesh(1), [dt.Replicate()]);
  });

  const two = cudaSkip(2);
  it.skipIf(two)(`a tensor sharded over two GPUs to cpu:0 and back to its shards${skipNote(two)}`, async () => {
    await roundTrip(cudaMesh(2, ['tp']), [dt.Shard(1)]);
  });
});
