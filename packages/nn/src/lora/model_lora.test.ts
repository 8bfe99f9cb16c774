// LoRA adapters on linears (linear_lora.ts, model_lora.ts) against the formula computed on the
// host in float64 from the same numbers: y = x Wᵀ + b + Σ weight · alpha / rank · (x Aᵀ) Bᵀ,
// through a plain Linear, a column-parallel and a row-parallel one, on one device, on 'tp' 2
// (A and B split as their base weight) and on 'dp' x 'tp'; two adapters with weights, disabled,
// deleted; fused equals unfused and unfuse gives back the same bits; a compiled call sees every
// change (it is traced again, never replayed stale); bad adapters are errors that change nothing;
// unloading gives the memory back; linears laid wide beside their adapters, or tall above them, run the same.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { DTorchError } from '@dtorch/common';
import * as nn from '../index.js';

class Mlp extends nn.Module {
  first: nn.Linear;
  up: nn.Linear;
  down: nn.Linear;
  constructor(mesh: dt.DeviceMesh) {
    super();
    this.first = new nn.Linear(6, 6, { mesh });
    this.up = new nn.ColumnParallelLinear(6, 8, { mesh });
    this.down = new nn.RowParallelLinearWithReplicateOutput(8, 6, { mesh, bias: false });
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.down.forward(this.up.forward(this.first.forward(x)).relu());
  }
}

type Matrix = number[][];
const matrix = (rows: number, cols: number, seed: number): Matrix =>
  Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => Math.sin(seed * 7.1 + i * 3.3 + j * 1.7) / Math.sqrt(cols)));
const times = (x: Matrix, w: Matrix): Matrix => x.map((row) => w.map((wr) => wr.reduce((s, v, i) => s + v * row[i]!, 0))); // x wᵀ
const plus = (a: Matrix, b: Matrix, s = 1): Matrix => a.map((r, i) => r.map((v, j) => v + s * b[i]![j]!));
// the output of `model` for `input`, read and released
async function run(model: nn.Module, input: dt.Tensor): Promise<Matrix> {
  const y = (model as Mlp).call(input);
  try {
    return await full(y);
  } finally {
    y.dispose();
  }
}
const full = async (t: dt.Tensor): Promise<Matrix> => {
  const whole = t.redistribute(t.placements.map(() => dt.Replicate()));
  try {
    return whole.arraySync() as Matrix;
  } finally {
    if (whole !== t) whole.dispose();
  }
};

interface Adapter {
  name: string;
  rank: number;
  alpha: number;
  // per module path: A [rank, in], B [out, rank]
  weights: Record<string, { a: Matrix; b: Matrix }>;
}
const sizes: Record<string, [number, number]> = { first: [6, 6], up: [6, 8], down: [8, 6] };
const adapter = (name: string, rank: number, alpha: number, seed: number, paths = Object.keys(sizes)): Adapter => ({
  name,
  rank,
  alpha,
  weights: Object.fromEntries(paths.map((p, k) => [p, { a: matrix(rank, sizes[p]![0], seed + k), b: matrix(sizes[p]![1], rank, seed + 10 + k) }])),
});
const style = adapter('style', 2, 4, 1);
const detail = adapter('detail', 3, 3, 2, ['up', 'down']);

function load(model: nn.Module, a: Adapter) {
  const mesh = (model as Mlp).first.weight.mesh;
  const modules = new Map(Object.entries(a.weights).map(([p, w]) => [p, { a: dt.tensor(w.a, { mesh }), b: dt.tensor(w.b, { mesh }), alpha: a.alpha }]));
  return nn.addLoraAdapter(model, a.name, modules, 'test');
}

// the model's forward on the host, from its base weights and the active adapters' numbers
async function reference(model: Mlp, x: Matrix, active: [Adapter, number][]): Promise<Matrix> {
  const linear = async (path: 'first' | 'up' | 'down', input: Matrix) => {
    const l = model[path];
    let y = times(input, await full(l.weight));
    if (l.bias) {
      const b = (await full(l.bias)) as unknown as number[];
      y = y.map((r) => r.map((v, j) => v + b[j]!));
    }
    for (const [a, weight] of active) {
      const w = a.weights[path];
      if (w) y = plus(y, times(times(input, w.a), w.b), (weight * a.alpha) / a.rank);
    }
    return y;
  };
  const h = (await linear('up', await linear('first', x))).map((r) => r.map((v) => Math.max(v, 0)));
  return linear('down', h);
}

const meshes: [string, () => dt.DeviceMesh][] = [
  ['one device', () => new dt.DeviceMesh('cpu', [0])],
  ['tp 2', () => new dt.DeviceMesh('cpu', [0, 1], ['tp'])],
  ['dp 2 x tp 2', () => new dt.DeviceMesh('cpu', [[0, 1], [2, 3]], ['dp', 'tp'])],
];

describe.each(meshes)('LoRA on linears, %s', (_name, makeMesh) => {
  const x = matrix(4, 6, 9);

  it('adds each active adapter with weight · alpha / rank; setAdapters, disable and delete change what runs', async () => {
    const mesh = makeMesh();
    const model = new Mlp(mesh);
    const input = dt.tensor(x, { mesh });
    const expectClose = async (got: dt.Tensor, want: Matrix) => {
      const g = await full(got);
      g.flat().forEach((v, i) => expect(v).toBeCloseTo(want.flat()[i]!, 5));
    };
    load(model, style);
    if (mesh.dimNames?.includes('tp')) {
      // A and B lie as their base weight: the column linear's B split by rows, the row linear's A by columns
      const tp = mesh.dimNames.indexOf('tp');
      expect(nn.linearLora(model.up)!.names).toEqual(['style']);
      expect(model.up.weight.placements[tp]!.isShard(0)).toBe(true);
      expect(model.down.weight.placements[tp]!.isShard(1)).toBe(true);
    }
    await expectClose(model.call(input), await reference(model, x, [[style, 1]]));
    load(model, detail);
    expect(nn.loraAdapterNames(model)).toEqual(['style', 'detail']);
    await expectClose(model.call(input), await reference(model, x, [[style, 1], [detail, 1]]));
    nn.setLoraAdapters(model, new Map([['style', 0.8], ['detail', 0.5]]));
    await expectClose(model.call(input), await reference(model, x, [[style, 0.8], [detail, 0.5]]));
    nn.enableLora(model, false);
    await expectClose(model.call(input), await reference(model, x, []));
    nn.enableLora(model, true);
    nn.deleteLoraAdapter(model, 'style');
    await expectClose(model.call(input), await reference(model, x, [[detail, 0.5]]));
    model.dispose();
  });

  it('fused equals unfused, unfuse gives back the same bits, and unload releases the adapters', async () => {
    const mesh = makeMesh();
    const model = new Mlp(mesh);
    const input = dt.tensor(x, { mesh });
    const before = dt.memory().numTensors;
    const bits = async () => Promise.all(model.parameters().map(async (p) => Array.from(new Uint32Array(((await full(p)).flat() as number[]).map((v) => new Float32Array([v])[0]!)))));
    const baseBits = await bits();
    load(model, style);
    load(model, detail);
    nn.setLoraAdapters(model, new Map([['style', 0.8], ['detail', 0.5]]));
    const unfused = await run(model, input);
    expect(nn.fuseLora(model)).toBe(3);
    expect(nn.loraFused(model)).toBe(true);
    const fused = await run(model, input);
    fused.flat().forEach((v, i) => expect(v).toBeCloseTo(unfused.flat()[i]!, 5));
    expect(() => nn.setLoraAdapters(model, new Map([['style', 1]]))).toThrow(/unfuseLora\(\) first/);
    expect(nn.unfuseLora(model)).toBe(3);
    expect(await bits()).toEqual(baseBits);
    (await run(model, input)).flat().forEach((v, i) => expect(v).toBeCloseTo(unfused.flat()[i]!, 5));
    nn.unloadLora(model);
    expect(nn.loraAdapterNames(model)).toEqual([]);
    expect(await bits()).toEqual(baseBits);
    expect(dt.memory().numTensors).toBe(before);
    input.dispose();
    model.dispose();
  });
});

describe('LoRA and compiled calls', () => {
  it('a compiled model is traced again after each change, and never replays a stale trace', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['tp']);
    const model = new Mlp(mesh).compile();
    const input = dt.tensor(matrix(4, 6, 9), { mesh });
    const x = matrix(4, 6, 9);
    const check = async (active: [Adapter, number][]) => {
      const got = await run(model, input);
      const want = await reference(model, x, active);
      got.flat().forEach((v, i) => expect(v).toBeCloseTo(want.flat()[i]!, 5));
    };
    await check([]);
    await check([]);
    const traces = model.compileStats!.traces;
    expect(model.compileStats!.replays).toBeGreaterThan(0);
    load(model, style);
    await check([[style, 1]]);
    expect(model.compileStats!.traces).toBe(traces + 1);
    nn.setLoraAdapters(model, new Map([['style', 0.25]]));
    await check([[style, 0.25]]);
    nn.enableLora(model, false);
    await check([]);
    nn.enableLora(model, true);
    const unfused = await run(model, input);
    nn.fuseLora(model);
    // fused, the weights hold the adapter: the reference reads them and adds nothing
    await check([]);
    (await run(model, input)).flat().forEach((v, i) => expect(v).toBeCloseTo(unfused.flat()[i]!, 5));
    nn.unfuseLora(model);
    nn.unloadLora(model);
    await check([]);
    model.dispose();
  });
});

// Linears that widen (in < out) are laid beside their adapters, the others above their A
// (LinearLora.layout, which the hf models call after each change): [x | A x] times [W | B], and
// x times [W; A] then B times the last columns added to the first, give the same outputs, a
// change is seen, fused and unfused agree, and unloading gives back every byte.
class Widening extends nn.Module {
  up: nn.Linear;
  down: nn.Linear;
  last: nn.Linear;
  constructor(mesh: dt.DeviceMesh) {
    super();
    this.up = new nn.Linear(6, 10, { mesh });
    this.down = new nn.Linear(10, 6, { mesh });
    this.last = new nn.Linear(6, 4, { mesh, bias: false });
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.last.forward(this.down.forward(this.up.forward(x).relu()));
  }
}

describe.each(meshes)('LoRA laid wide, %s', (_name, makeMesh) => {
  const wideSizes: Record<string, [number, number]> = { up: [6, 10], down: [10, 6], last: [6, 4] };
  const wideAdapter = (name: string, rank: number, alpha: number, seed: number): Adapter => ({
    name,
    rank,
    alpha,
    weights: Object.fromEntries(Object.entries(wideSizes).map(([p, [i, o]], k) => [p, { a: matrix(rank, i, seed + k), b: matrix(o, rank, seed + 10 + k) }])),
  });
  const one = wideAdapter('one', 2, 4, 3);
  const two = wideAdapter('two', 3, 3, 4);
  const x = matrix(5, 6, 8);
  const expected = async (model: Widening, active: [Adapter, number][]) => {
    const linear = async (l: nn.Linear, path: string, input: Matrix) => {
      let y = times(input, await full(l.weight));
      if (l.bias) y = y.map((r) => r.map((v, j) => v + ((l.bias as unknown as dt.Tensor).arraySync() as number[])[j]!));
      for (const [a, weight] of active) y = plus(y, times(times(input, a.weights[path]!.a), a.weights[path]!.b), (weight * a.alpha) / a.rank);
      return y;
    };
    const hidden = await linear(model.down, 'down', (await linear(model.up, 'up', x)).map((r) => r.map((v) => Math.max(v, 0))));
    return linear(model.last, 'last', hidden);
  };
  const relayout = (model: Widening) => [model.up, model.down, model.last].map((l) => nn.linearLora(l)?.layout(true) ?? false);

  it('runs [x | A x] times [W | B] where in < out, x times [W; A] elsewhere, equal to the adapters added one by one, through every change', async () => {
    const mesh = makeMesh();
    const model = new Widening(mesh);
    const input = dt.tensor(x, { mesh });
    const before = dt.memory();
    const check = async (active: [Adapter, number][]) => {
      const got = (await run(model, input)).flat();
      const want = (await expected(model, active)).flat();
      got.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 5));
    };
    for (const a of [one, two]) {
      const modules = new Map(Object.entries(a.weights).map(([p, w]) => [p, { a: dt.tensor(w.a, { mesh }), b: dt.tensor(w.b, { mesh }), alpha: a.alpha }]));
      nn.addLoraAdapter(model, a.name, modules, 'test');
    }
    await check([[one, 1], [two, 1]]); // not laid yet: the delta path
    expect(relayout(model)).toEqual([true, true, true]); // 6 -> 10 widens: wide; 10 -> 6 and 6 -> 4 do not: tall
    expect(nn.linearLora(model.up)!.wide()!.buffer.shape).toEqual([10, 6 + 2 + 3]);
    expect(model.up.weight.shape).toEqual([10, 6]);
    const down = nn.linearLora(model.down)!.tall()!;
    expect([down.weight.shape, down.bias!.shape, model.down.weight.shape, model.down.bias!.shape]).toEqual([[6 + 2 + 3, 10], [6 + 2 + 3], [6, 10], [6]]);
    expect(nn.linearLora(model.last)!.tall()!.bias).toBeUndefined();
    await check([[one, 1], [two, 1]]);
    nn.setLoraAdapters(model, new Map([['one', 0.8], ['two', 0.5]]));
    expect(nn.linearLora(model.up)!.wide()).toBeUndefined(); // a change makes the layout stale: never read stale
    expect(nn.linearLora(model.down)!.tall()).toBeUndefined();
    await check([[one, 0.8], [two, 0.5]]);
    relayout(model);
    await check([[one, 0.8], [two, 0.5]]);
    const unfused = (await run(model, input)).flat();
    nn.fuseLora(model);
    expect(relayout(model)).toEqual([false, false, false]); // fused: nothing runs beside the weight
    (await run(model, input)).flat().forEach((v, i) => expect(v).toBeCloseTo(unfused[i]!, 5));
    nn.unfuseLora(model);
    relayout(model);
    await check([[one, 0.8], [two, 0.5]]);
    nn.enableLora(model, false);
    expect(relayout(model)).toEqual([false, false, false]);
    await check([]);
    nn.enableLora(model, true);
    nn.deleteLoraAdapter(model, 'one');
    relayout(model);
    await check([[two, 0.5]]);
    nn.unloadLora(model);
    await check([]);
    expect([model.down.weight.shape, model.down.bias!.shape]).toEqual([[6, 10], [6]]);
    // the laid buffers were copied back to the weight's and bias's own sizes: every byte given back
    expect(dt.memory().numTensors).toBe(before.numTensors);
    expect(dt.memory().numBytes).toBe(before.numBytes);
    input.dispose();
    model.dispose();
  });
});

describe('bad adapters', () => {
  it('a wrong shape or a missing target is one error that leaves the model as it was', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const model = new Mlp(mesh);
    const ok = { a: dt.zeros([2, 6], { mesh }), b: dt.zeros([8, 2], { mesh }), alpha: 2 };
    const bad = { a: dt.zeros([2, 6], { mesh }), b: dt.zeros([8, 3], { mesh }), alpha: 2 };
    const err = (() => {
      try {
        nn.addLoraAdapter(model, 'x', new Map([['up', ok], ['down', bad]]), 'bad.safetensors');
      } catch (e) {
        return e as DTorchError;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(DTorchError);
    expect(err!.code).toBe('BAD_FILE');
    expect(err!.message).toMatch(/bad\.safetensors: "down": .*lora_A \[rank, 8\] and lora_B \[6, rank\]/);
    expect(nn.linearLora(model.up)).toBeUndefined();
    expect(() => nn.addLoraAdapter(model, 'x', new Map([['blocks.0.to_q', ok]]), 'f')).toThrow(/targets "blocks.0.to_q", which Mlp does not have.*strict: false/);
    expect(nn.addLoraAdapter(model, 'x', new Map([['blocks.0.to_q', ok], ['up', ok]]), 'f', true)).toEqual(['blocks.0.to_q']);
    expect(nn.loraAdapterNames(model)).toEqual(['x']);
    expect(() => nn.setLoraAdapters(model, new Map([['y', 1]]))).toThrow(/no LoRA adapter named "y".*loaded: "x"/);
    model.dispose();
  });
});
