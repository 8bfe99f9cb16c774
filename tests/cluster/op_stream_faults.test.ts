// Faults of the op stream with real processes on 127.0.0.1: a worker killed with SIGKILL while
// reads wait on the work of meshes over it. Every pending read rejects with NODE_LOST naming the
// node within 5 s, a mesh with a rank on the lost node takes no more work, the live node
// still runs its own meshes (once its collectives with the lost node fail: at the latest at the
// collective timeout), and the cluster shuts down cleanly and starts again with new workers.
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { startWorker, stopAll, within, type Child } from './cluster_processes.js';

afterEach(async () => {
  await dt.cluster.shutdown();
  stopAll();
});

async function clusterOf(count: number): Promise<Child[]> {
  const workers: Child[] = [];
  const started = dt.cluster.start({
    workers: count,
    devices: [{ kind: 'cpu', index: 0 }],
    joinTimeoutMs: 30_000,
    onListening: (address) => {
      // the live node's ranks may be waiting in a collective with the killed one's: they fail when
      // Gloo sees the closed connection, or (one not yet connected) at the collective timeout
      // (docs/cluster.md), here 4 s rather than 10 minutes
      for (let i = 0; i < count; i++) workers.push(startWorker(address, { devices: 'cpu:0-1', env: { DTORCH_COLLECTIVE_TIMEOUT_MS: '4000' } }));
    },
  });
  await within(`starting a cluster of ${count}`, 40_000, started, workers);
  return workers;
}

// Work that keeps a mesh's ranks busy for a while (seconds on 2 cores), then a read of it.
function slowRead(mesh: dt.DeviceMesh): Promise<unknown> {
  const x = dt.randn([512, 512], { seed: 1, mesh, placements: [dt.Shard(0)] });
  let y = x;
  for (let i = 0; i < 80; i++) {
    const next = y.matmul(x.redistribute([dt.Replicate()])).tanh();
    if (y !== x) y.dispose();
    y = next;
  }
  const read = y.sum().data().then(
    () => new Error('the read resolved'),
    (err: unknown) => err,
  );
  dt.dispose([x, y]);
  return read;
}

describe('a worker killed while reads wait on it', () => {
  it('rejects every pending read with NODE_LOST naming it within 5 s; the live node goes on; shutdown and a new start work', async () => {
    const workers = await clusterOf(2);
    const byNode = (node: number) => workers.find((w) => w.process.pid === dt.cluster.nodes().find((n) => n.node === node)!.pid)!;
    const [first, second] = [byNode(1), byNode(2)];
    // cluster cpu devices: 0 here, 1-2 node 1's, 3-4 node 2's
    const across = new dt.DeviceMesh('cpu', [1, 2, 3, 4]);
    const onSecond = new dt.DeviceMesh('cpu', [3, 4]);
    const onFirst = new dt.DeviceMesh('cpu', [1, 2]);
    const pending = [slowRead(across), slowRead(onSecond)];
    await new Promise((r) => setTimeout(r, 200)); // the work is streamed and running
    const killedAt = Date.now();
    second!.process.kill('SIGKILL');
    const errors = await within('the pending reads', 10_000, Promise.all(pending), workers);
    expect(Date.now() - killedAt).toBeLessThan(5000);
    for (const err of errors) {
      expect((err as dt.DTorchError).code, String(err)).toBe('NODE_LOST');
      expect((err as Error).message).toMatch(/lost node 2 \(/);
    }
    // a mesh with ranks on the lost node takes nothing more, at the call
    expect(() => dt.ones([4], { mesh: onSecond })).toThrow(expect.objectContaining({ code: 'NODE_LOST', message: expect.stringMatching(/has a rank on a node of the cluster that was lost/) }));
    // the live node runs its own meshes
    const u = dt.arange(6, { mesh: onFirst }).mul(2);
    expect(Array.from(await within("a read on the live node's mesh", 10_000, u.data(), workers), Number)).toEqual([0, 2, 4, 6, 8, 10]);
    await within('a sync after the loss', 10_000, dt.sync(), workers);

    await within('the shutdown', 10_000, dt.cluster.shutdown('test done'), workers);
    expect((await within("the live worker's exit", 10_000, first!.exited, workers)).code, first!.output()).toBe(0);
    const again = await clusterOf(1);
    const fresh = new dt.DeviceMesh('cpu', dt.cluster.devices('cpu').filter((d) => d.node === 1).map((d) => d.index));
    const read = dt.arange(4, { mesh: fresh, placements: [dt.Shard(0)] }).add(1).data();
    expect(Array.from(await within('a read on the new cluster', 10_000, read, again), Number)).toEqual([1, 2, 3, 4]);
    await within('the second shutdown', 10_000, dt.cluster.shutdown('done again'), again);
    expect((await within("the new worker's exit", 10_000, again[0]!.exited, again)).code, again[0]!.output()).toBe(0);
  }, 60_000);
});
