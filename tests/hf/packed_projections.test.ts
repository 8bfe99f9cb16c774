// PackedProjections (packages/hf/src/models/attention/packed_projections.ts): linears of one
// input (an attention's q, k and v) packed into one buffer run as one matmul, with the values of
// running them one by one; the parameters become views of the buffer (no second copy); a
// parameter replaced after packing (setTensor, loadStateDict) sends forward() back to the linears
// one by one with the new values, also inside a compiled call; weights split over devices are not
// packed. The engine joins the packed views without a copy (cat of neighbours in one buffer).
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { PackedProjections } from '@dtorch/hf';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';
import { countRecords } from '../count_records.js';

const cpu = new dt.DeviceMesh('cpu', [0]);

class Qkv extends nn.Module {
  q = new nn.Linear(8, 6, { mesh: cpu });
  k = new nn.Linear(8, 6, { mesh: cpu });
  v = new nn.Linear(8, 4, { mesh: cpu });
  readonly packs = new PackedProjections(() => [this.q, this.k, this.v]);
  forward(x: dt.Tensor): dt.Tensor {
    return dt.cat(this.packs.forward(x), -1);
  }
}

const values = async (t: dt.Tensor) => Array.from((await t.data()) as Float32Array);
const close = (got: number[], want: number[]) => {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < got.length; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(want[i]!)));
};

describe('PackedProjections', () => {
  it('runs the linears as one matmul once packed, with their values and no second copy of the weights', async () => {
    const m = new Qkv();
    const x = dt.randn([2, 3, 8], { seed: 1, mesh: cpu });
    const separate = dt.tidy(() => dt.cat([m.q.forward(x), m.k.forward(x), m.v.forward(x)], -1));
    const want = await values(separate);
    const weightObjects = [m.q.weight, m.k.weight, m.v.weight];
    const tensors = dt.memory().numTensors;
    expect(m.packs.packed).toBe(false);
    expect(countRecords('linear', () => dt.dispose(m.call(x)))).toBe(3);
    expect(m.packs.pack()).toBe(true);
    expect(m.packs.packed).toBe(true);
    expect(dt.memory().numTensors, 'each parameter took its view: nothing more is held').toBe(tensors);
    expect([m.q.weight, m.k.weight, m.v.weight], 'the same Parameter objects').toEqual(weightObjects);
    let out: dt.Tensor | undefined;
    expect(countRecords('linear', () => (out = m.call(x)))).toBe(1);
    close(await values(out!), want);
    // the state dict is the model's as before: the same keys and values
    const state = m.stateDict();
    expect([...state.keys()].sort()).toEqual(['k.bias', 'k.weight', 'q.bias', 'q.weight', 'v.bias', 'v.weight']);
    expect(state.get('v.weight')!.shape).toEqual([4, 8]);
    dt.dispose([x, separate, out!, ...state.values()]);
    m.dispose();
  });

  it('runs the linears one by one, with the new values, once a parameter is replaced; packs again on request', async () => {
    const m = new Qkv();
    m.packs.pack();
    const x = dt.randn([3, 8], { seed: 2, mesh: cpu });
    m.setTensor('k.weight', dt.randn([6, 8], { seed: 3, mesh: cpu }));
    expect(m.packs.packed).toBe(false);
    const want = await values(dt.tidy(() => dt.cat([m.q.forward(x), m.k.forward(x), m.v.forward(x)], -1)));
    let out: dt.Tensor | undefined;
    expect(countRecords('linear', () => (out = m.call(x)))).toBe(3);
    close(await values(out!), want);
    expect(m.packs.pack()).toBe(true);
    let again: dt.Tensor | undefined;
    expect(countRecords('linear', () => (again = m.call(x)))).toBe(1);
    close(await values(again!), want);
    dt.dispose([x, out!, again!]);
    m.dispose();
  });

  it('gives a compiled call the new values after the weights are reloaded', async () => {
    const m = new Qkv();
    m.packs.pack();
    m.compile();
    const x = dt.randn([3, 8], { seed: 4, mesh: cpu });
    for (let i = 0; i < 3; i++) dt.dispose(m.call(x)); // traced, then copied
    const reloaded = new Map([...m.stateDict()].map(([k, t]) => [k, dt.tidy(() => t.mul(2))]));
    await m.loadStateDict(reloaded);
    const want = await values(dt.tidy(() => dt.cat([m.q.forward(x), m.k.forward(x), m.v.forward(x)], -1)));
    const out = m.call(x);
    close(await values(out), want);
    dt.dispose([x, out, ...reloaded.values()]);
    m.dispose();
  });

  it('runs running LoRA adapters in the base matmul ([x | A x] times [W | B]) with the per-linear values', async () => {
    const m = new Qkv();
    const x = dt.randn([2, 3, 8], { seed: 7, mesh: cpu });
    const adapt = (l: nn.Linear, seed: number, rank: number) => {
      const lora = nn.LinearLora.of(l);
      lora.add('style', dt.randn([rank, 8], { seed, mesh: cpu }), dt.randn([l.outFeatures, rank], { seed: seed + 1, mesh: cpu }), 2 * rank);
      lora.setActive(new Map([['style', 0.5]]));
    };
    const start = dt.memory();
    adapt(m.q, 10, 2);
    adapt(m.v, 20, 3); // k has none: its B block is zeros
    const perLinear = async () => {
      const t = dt.tidy(() => dt.cat([m.q.forward(x), m.k.forward(x), m.v.forward(x)], -1));
      const v = await values(t);
      t.dispose();
      return v;
    };
    const want = await perLinear();
    const kWeight = await values(m.k.weight);
    expect(m.packs.pack()).toBe(true);
    expect(m.q.weight.shape, 'each weight is its rows of the first `in` columns').toEqual([6, 8]);
    let out: dt.Tensor | undefined;
    expect(countRecords('linear', () => (out = m.call(x))), 'A x, then one matmul of [x | A x]').toBe(2);
    close(await values(out!), want);
    // the weights are strided views of the buffer: their own values, and saved as such
    const saved = await nn.tensorBytes(m.k.weight);
    expect(Array.from(new Float32Array(saved.data.buffer, saved.data.byteOffset, 48))).toEqual(kWeight);
    // a change of adapters: one by one (with the new weights) until pack() lays B again
    nn.LinearLora.of(m.q).setActive(new Map([['style', 1.5]]));
    expect(m.packs.packed).toBe(false);
    const reweighted = await perLinear();
    let after: dt.Tensor | undefined;
    expect(countRecords('linear', () => (after = m.call(x)))).toBeGreaterThan(2);
    close(await values(after!), reweighted);
    expect(m.packs.pack()).toBe(true);
    let repacked: dt.Tensor | undefined;
    expect(countRecords('linear', () => (repacked = m.call(x)))).toBe(2);
    close(await values(repacked!), reweighted);
    // adapters removed, packed again: the plain packed matmul over dense weights
    for (const l of [m.q, m.v]) nn.LinearLora.of(l).remove('style');
    m.packs.releaseLora();
    const tensors = dt.memory().numTensors;
    expect(m.packs.pack()).toBe(true);
    expect(dt.memory().numTensors, 'the [W | B] buffer went with the adapters').toBeLessThanOrEqual(tensors);
    const base = await perLinear();
    let plain: dt.Tensor | undefined;
    expect(countRecords('linear', () => (plain = m.call(x)))).toBe(1);
    close(await values(plain!), base);
    dt.dispose([out!, after!, repacked!, plain!]);
    // two packs with adapters and one without leave nothing behind: the buffers with B went
    expect(dt.memory().numTensors, 'tensors after the adapters went').toBe(start.numTensors);
    expect(dt.memory().numBytes, 'bytes after the adapters went').toBe(start.numBytes);
    dt.dispose(x);
    m.dispose();
  });

  it('leaves weights split over devices, and linears of other inputs widths, as they are', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['tp']);
    const colwise = [new nn.ColumnParallelLinear(8, 6, { mesh }), new nn.ColumnParallelLinear(8, 6, { mesh })];
    expect(new PackedProjections(() => colwise).pack()).toBe(false);
    // plain linears whose weights were split: the same
    const split = [new nn.Linear(8, 6, { mesh }), new nn.Linear(8, 6, { mesh })];
    for (const l of split) l.setTensor('weight', l.weight.redistribute([dt.Shard(0)]));
    expect(split[0]!.weight.placements.map(String)).toEqual(['S(0)']);
    expect(new PackedProjections(() => split).pack()).toBe(false);
    const widths = [new nn.Linear(8, 6, { mesh: cpu }), new nn.Linear(4, 6, { mesh: cpu })];
    expect(new PackedProjections(() => widths).pack()).toBe(false);
    const biases = [new nn.Linear(8, 6, { mesh: cpu }), new nn.Linear(8, 6, { mesh: cpu, bias: false })];
    expect(new PackedProjections(() => biases).pack()).toBe(false);
    for (const l of [...colwise, ...split, ...widths, ...biases]) l.dispose();
  });
});

describe('PackedProjections on a GPU', () => {
  const skip = cudaSkip(1);
  it.skipIf(skip)(`runs one matmul and no copy: the packed weights are joined where they lie${skipNote(skip)}`, async () => {
    const gpu = cudaMesh(1);
    const linears = [0, 1, 2].map(() => new nn.Linear(768, 768, { mesh: gpu, dtype: 'bfloat16' }));
    const packs = new PackedProjections(() => linears);
    const x = dt.randn([1, 77, 768], { seed: 6, mesh: gpu, dtype: 'bfloat16' });
    const want = await Promise.all(linears.map((l) => values(dt.tidy(() => l.forward(x).to('float32')))));
    expect(packs.pack()).toBe(true);
    let outs: dt.Tensor[] = [];
    await dt.sync();
    const trace = await dt.cuda.traceKernels(async () => {
      outs = packs.forward(x);
      await dt.sync();
    }, { top: 20 });
    const names = trace.top.map((k) => k.name);
    expect(names.filter((n) => /copy|Copy|CatArray/.test(n)), 'no copy of the weights').toEqual([]);
    expect(trace.top.filter((k) => /gemm|nvjet|cutlass|sm90/i.test(k.name)).reduce((n, k) => n + k.calls, 0), `one matmul: ${names.join(', ')}`).toBe(1);
    // within a bfloat16 rounding of each linear alone
    for (let i = 0; i < 3; i++) {
      const got = await values(dt.tidy(() => outs[i]!.to('float32')));
      const worst = got.reduce((m, v, j) => Math.max(m, Math.abs(v - want[i]![j]!) / Math.max(1, Math.abs(want[i]![j]!))), 0);
      expect(worst).toBeLessThanOrEqual(2 ** -7);
    }
    dt.dispose([x, ...outs]);
    for (const l of linears) l.dispose();
  });
});

describe('cat of neighbours in one buffer', () => {
  it('equals the copy, for views side by side and for views that are not', async () => {
    const whole = dt.randn([10, 4], { seed: 5, mesh: cpu });
    const parts = [whole.narrow(0, 0, 3), whole.narrow(0, 3, 5), whole.narrow(0, 8, 2)];
    expect(await values(dt.cat(parts, 0))).toEqual(await values(whole));
    const swapped = dt.cat([parts[1]!, parts[0]!], 0);
    expect(await values(swapped)).toEqual([...(await values(parts[1]!)), ...(await values(parts[0]!))]);
    const twice = dt.cat([parts[0]!, parts[0]!], 0);
    expect(await values(twice)).toEqual([...(await values(parts[0]!)), ...(await values(parts[0]!))]);
    // the join outlives the buffer's other holders
    const joined = dt.cat([whole.narrow(1, 0, 4).narrow(0, 0, 5), whole.narrow(0, 5, 5)], 0);
    const want = await values(whole);
    dt.dispose([whole, ...parts]);
    expect(await values(joined)).toEqual(want);
    dt.dispose([swapped, twice, joined]);
  });
});
