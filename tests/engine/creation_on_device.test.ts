// Tensors made from the host on GPUs (native/core/operators/creation.cpp): an integer range
// (a timestep embedding's, a rotary table's) is made by the GPU itself, with the host's values,
// so a CUDA graph can hold it and a step that makes one is one span; any other range is made on
// the host and copied, with the host's values still. Host data reaches the GPU through pinned
// memory, queued without waiting for the GPU to run what came before. The oracle is the same tensors made on a CPU mesh.
// Skipped without a GPU (run on the device machine).
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

const gpu = dt.cuda.isAvailable();
const mesh = gpu ? new dt.DeviceMesh('cuda', [0]) : undefined;
const cpu = new dt.DeviceMesh('cpu', [0]);

async function values(t: dt.Tensor): Promise<number[]> {
  const v = Array.from((await t.to('float32').data()) as Float32Array);
  t.dispose();
  return v;
}
const copiesFromHost = (trace: Awaited<ReturnType<typeof dt.cuda.traceKernels>>) => trace.top.filter((k) => /memcpy htod/i.test(k.name)).reduce((n, k) => n + k.calls, 0);

describe.skipIf(!gpu)('tensors made from the host on a GPU', () => {
  it("makes integer ranges on the GPU, other ranges on the host, both with the host's values", async () => {
    // [start, end, step, dtype, made on the GPU]
    const cases: [number, number, number, dt.DType, boolean][] = [
      [0, 128, 1, 'float32', true],
      [0, 3072, 2, 'bfloat16', true], // past bfloat16's exact integers: rounded the same way
      [5, -40, -3, 'float16', true],
      [-(2 ** 24), 2 ** 24, 2 ** 20, 'float32', true],
      [0, 2 ** 24 + 8, 4, 'float32', false], // past 2^24
      [0, 1, 0.1, 'float32', false],
      [0.5, 10, 1, 'bfloat16', false],
      [-7, 1000, 13, 'int64', true],
    ];
    for (const [start, end, step, dtype, onGpu] of cases) {
      const what = `arange(${start}, ${end}, ${step}) ${dtype}`;
      let got: number[] = [];
      const trace = await dt.cuda.traceKernels(async () => {
        const t = dt.arange(start, end, step, { mesh, dtype });
        await dt.sync();
        got = await values(t);
      }, { top: 50 });
      expect(copiesFromHost(trace) > 0, `${what}: copied from the host`).toBe(!onGpu);
      const expected = await values(dt.arange(start, end, step, { mesh: cpu, dtype }));
      expect(got.length, what).toBe(expected.length);
      const first = got.findIndex((v, i) => !Object.is(v, expected[i]));
      expect(first, `${what}: element ${first} is ${got[first]}, the host gives ${expected[first]}`).toBe(-1);
    }
  });

  it('replays a step that makes a range between its kernels as one graph', async () => {
    // 3 kernels, an integer range, 3 kernels: were the range made on the host, neither side of it
    // would be long enough for a graph (4 kernels)
    const x = dt.randn([8, 32], { seed: 1, mesh });
    const step = () =>
      dt.graph.step(() =>
        dt.tidy(() => {
          const h = x.mul(2).add(1).tanh();
          return h.mul(dt.arange(0, 32, 1, { mesh, dtype: 'float32' })).exp().sum(-1);
        }),
      );
    const before = dt.graph.stats();
    const results: number[][] = [];
    for (let i = 0; i < 6; i++) results.push(await values(step()));
    const after = dt.graph.stats();
    expect(after.captured - before.captured, JSON.stringify(after)).toBeGreaterThanOrEqual(1);
    expect(after.replays - before.replays, JSON.stringify(after)).toBeGreaterThanOrEqual(4);
    for (const r of results.slice(1)) expect(r).toEqual(results[0]);
    dt.graph.setEnabled(false);
    expect(await values(step())).toEqual(results[0]);
    dt.graph.setEnabled(true);
    x.dispose();
  });

  it('copies host data to the GPU from pinned memory', async () => {
    // from pageable memory the copy would hold the worker until the GPU ran all it had queued
    let got: number[] = [];
    const trace = await dt.cuda.traceKernels(async () => {
      got = await values(dt.tensor([[1, 2, 3]], { mesh }));
    }, { top: 50 });
    const uploads = trace.top.filter((k) => /memcpy htod/i.test(k.name)).map((k) => k.name);
    expect(uploads.length, JSON.stringify(trace.top.map((k) => k.name))).toBeGreaterThan(0);
    for (const name of uploads) expect(name).toMatch(/pinned/i);
    expect(got).toEqual([1, 2, 3]);
  });
});
