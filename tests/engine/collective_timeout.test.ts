// DTORCH_COLLECTIVE_TIMEOUT_MS bounds every wait of a collective, and a collective that timed
// out fails on every rank: a participant that arrives after its peer gave up fails too, instead
// of computing a result its peer does not have (which a read of rank 0 alone would return).
//
// Deterministic slowness: the worker of cpu:0 first runs big matmuls recorded on the 1-device
// mesh [0] (about half a second here), then the collective on [0, 1]; cpu:1 has nothing else to
// do and waits for it far longer than the timeout (5 ms, about 100x less).
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';
import { runNode } from './run_node.js';


// Work that keeps cpu:0's worker busy for a while. Its result is kept until the caller disposes
// it (after the reads): work whose result dies unread in its segment is dropped, never run.
function keepCpu0Busy(): dt.Tensor {
  return dt.tidy(() => {
    const solo = new dt.DeviceMesh('cpu', [0]);
    const a = dt.randn([1200, 1200], { mesh: solo, seed: 1 });
    let b = a;
    for (let i = 0; i < 4; i++) b = b.matmul(a);
    return b;
  });
}

async function rejectionOf(t: dt.Tensor): Promise<dt.DTorchError> {
  const r = await t.data().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(r).toBeInstanceOf(dt.DTorchError);
  return r as dt.DTorchError;
}

describe('collective timeout', () => {
  afterEach(() => engine().setCollectiveTimeout(0)); // back to the environment's

  it('fails on every rank with TIMEOUT naming the op, and the mesh works afterwards', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1]);
    const x = dt.tidy(() => dt.arange(0, 8, 1, { mesh, dtype: 'float32' }).reshape([2, 4]).redistribute([dt.Shard(0)]));
    await x.data();
    engine().setCollectiveTimeout(5);
    const busy = keepCpu0Busy();
    const y = x.redistribute([dt.Replicate()]); // an all-gather: cpu:1 waits for cpu:0
    const pieces = [y.toLocal(0), y.toLocal(1)];
    const read = await rejectionOf(y);
    expect(read.code).toBe('TIMEOUT');
    expect(read.op).toBe('redistribute');
    expect(read.message).toMatch(/^redistribute failed: collective timed out after 5 ms with 1 of 2 participants arrived/);
    expect(read.message).toContain('collective_timeout.test.ts'); // the line that recorded it
    for (const piece of pieces) {
      const e = await rejectionOf(piece); // rank 0 arrived late: it fails too, not with a result
      expect(e.code).toBe('TIMEOUT');
      expect(e.message).toContain('collective timed out after 5 ms');
    }
    dt.dispose([y, busy, ...pieces]);
    // with the usual timeout the same collective runs on the same mesh
    engine().setCollectiveTimeout(0);
    const busyAgain = keepCpu0Busy();
    const again = x.redistribute([dt.Replicate()]);
    expect(Array.from((await again.data()) as Float32Array)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    dt.dispose([x, again, busyAgain]);
  });

  it('bounds a transfer between meshes too (the receiver waits for the sender)', async () => {
    const one = new dt.DeviceMesh('cpu', [1]);
    const zero = new dt.DeviceMesh('cpu', [0]);
    const x = dt.full([3], 2, { mesh: zero });
    await x.data();
    engine().setCollectiveTimeout(5);
    const busy = keepCpu0Busy();
    const moved = x.redistribute(one, [dt.Replicate()]);
    const e = await rejectionOf(moved);
    expect(e.code).toBe('TIMEOUT');
    expect(e.message).toContain('timed out after 5 ms');
    dt.dispose([moved, busy]);
    engine().setCollectiveTimeout(0);
    const fine = x.redistribute(one, [dt.Replicate()]);
    expect(Array.from((await fine.data()) as Float32Array)).toEqual([2, 2, 2]);
    dt.dispose([x, fine]);
  });

  it('refuses a timeout that cannot work', () => {
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 31]) expect(() => engine().setCollectiveTimeout(bad)).toThrow(dt.DTorchError);
  });

  it('is read from DTORCH_COLLECTIVE_TIMEOUT_MS', () => {
    const script = `
      import * as dt from '@dtorch/api';
      const mesh = new dt.DeviceMesh('cpu', [0, 1]);
      const x = dt.zeros([2, 4], { mesh, placements: [dt.Shard(0)] });
      await dt.sync(); // made, without a collective (a read gathers: two busy workers may not meet within 5 ms)
      const solo = new dt.DeviceMesh('cpu', [0]);
      const a = dt.randn([1200, 1200], { mesh: solo, seed: 1 });
      let b = a;
      for (let i = 0; i < 4; i++) b = b.matmul(a);
      try { await x.redistribute([dt.Replicate()]).data(); console.log('no timeout'); }
      catch (e) { console.log('caught', e.code, e.message.split('\\n')[0]); }`;
    const r = runNode(script, { DTORCH_COLLECTIVE_TIMEOUT_MS: '5' }, 90_000); // under CI's load the matmuls take long
    expect(r.stdout, `status ${r.status}, stderr: ${r.stderr}`).toContain('caught TIMEOUT redistribute failed: collective timed out after 5 ms');
    expect(r.status).toBe(0);
  }, 120_000);
});
