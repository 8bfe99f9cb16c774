// The client -> controller -> worker pipeline end to end: ordering, multi-device replication,
// errors at the call site and from kernels, and that a failure leaves later work running.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

describe('pipeline', () => {
  it('a read after 1,000 recorded ops sees all of them, in order', async () => {
    let x = dt.zeros([4]);
    for (let i = 0; i < 1000; i++) {
      // not commutative: order matters; x_{i+1} = 2 * x_i - (x_i - 1) = x_i + 1
      const doubled = x.mul(2);
      const next = doubled.sub(x.sub(1));
      x.dispose();
      doubled.dispose();
      x = next;
    }
    expect(await x.data()).toEqual(new Float32Array([1000, 1000, 1000, 1000]));
  });

  it('a 4-device Replicate mesh gives the same values as 1 device', async () => {
    const one = new dt.DeviceMesh('cpu', [0]);
    const four = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
    const program = (mesh: dt.DeviceMesh) => {
      const a = dt.randn([8, 16], { seed: 42, mesh });
      const b = dt.rand([16, 4], { seed: 7, mesh });
      return a.matmul(b).add(dt.arange(4, undefined, 1, { mesh })).relu().sum(0).div(3);
    };
    const [expected, actual] = [program(one), program(four)];
    expect(actual.mesh.size).toBe(4);
    expect(await actual.data()).toEqual(await expected.data());
    // every rank computed and holds the result: the read waited for rank 0 only, so wait for
    // the others too (on a loaded machine their workers were once still running), and keep both
    // results alive through the count
    await dt.sync();
    const perDevice = dt.memory().perDevice.filter((d) => /^cpu:[0-3]$/.test(d.device));
    expect(perDevice.length).toBe(4);
    for (const d of perDevice.slice(1)) expect(d.allocatedBytes).toBeGreaterThan(0);
    dt.dispose([expected, actual]);
  });

  it('bad input throws DTorchError at the call site, naming both shapes', () => {
    const a = dt.zeros([2, 3]);
    const b = dt.zeros([4]);
    let err: unknown;
    try {
      a.add(b);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(dt.DTorchError);
    expect((err as dt.DTorchError).code).toBe('SHAPE_MISMATCH');
    expect((err as Error).message).toBe(
      'add: shapes [2, 3] and [4] cannot be broadcast: dim -1 has sizes 3 and 4 (sizes must match or one of them be 1)',
    );
    expect((err as Error).stack).toContain('pipeline.test.ts');
    expect(() => dt.zeros([2, 3]).matmul(dt.zeros([4, 2]))).toThrow(
      'matmul: shapes [2, 3] and [4, 2] cannot be multiplied: contracted dims have sizes 3 and 4',
    );
    expect(() => dt.zeros([2]).sum(2)).toThrow('sum: dim 2 is out of range for a 1-d tensor (expected a dim in [-1, 0])');
    const other = new dt.DeviceMesh('cpu', [1]);
    expect(() => dt.zeros([2]).add(dt.zeros([2], { mesh: other }))).toThrow(/MESH|mesh/);
  });

  it('a kernel failure rejects every dependent read, names the op and the recording line; later work runs', async () => {
    // an index out of range is known only from the index's values, on the worker
    const failed = dt.tensor([1, 2]).indexSelect(0, dt.tensor([5n]));
    const downstream = failed.to('float64').add(1);
    const independent = dt.ones([2]).add(1);
    const rejection = await failed.data().catch((e: unknown) => e);
    expect(rejection).toBeInstanceOf(dt.DTorchError);
    expect((rejection as dt.DTorchError).code).toBe('KERNEL_FAILED');
    expect((rejection as dt.DTorchError).op).toBe('index_select');
    expect((rejection as Error).message).toMatch(/^index_select failed: index out of range/);
    expect((rejection as Error).message).toMatch(/recorded at:\n.*pipeline\.test\.ts/);
    await expect(downstream.data()).rejects.toThrow(/index_select failed/);
    expect(() => downstream.dataSync()).toThrow(/index_select failed/);
    expect(await independent.data()).toEqual(new Float32Array([2, 2]));
  });

  it('an allocation the device cannot satisfy fails the read, not the process', async () => {
    // 128 PiB: more than any address space, so it fails whatever the machine's overcommit policy
    const huge = dt.empty([2 ** 27, 2 ** 28], { dtype: 'float32' });
    const rejection = await huge.sum().data().catch((e: unknown) => e);
    expect((rejection as dt.DTorchError).code).toBe('KERNEL_FAILED');
    expect((rejection as Error).message).toMatch(/^empty failed: .*(alloc|memory)/i);
    expect(await dt.ones([1]).item()).toBe(1);
    expect(() => dt.empty([2 ** 31, 2 ** 31, 4])).toThrow('holds more bytes than 64-bit sizes can count');
  });
});
