// Compiled calls (dt.graph.compile, Module.compile; native core/graph/call_trace): a call's
// recording is traced once per argument shape and copied on later calls without running the
// function. The copies give the same bits as running it, across segment boundaries and
// redistributes on a mesh of 2; other shapes trace again; a disposed weight drops the trace;
// calls that read, make host data, keep tensors or dispose arguments run as they are (and say
// why); a throw leaves nothing behind; memory stays flat over many replays; graphs off runs
// every call as it is; a tiny CLIP text model compiled gives the bits of the uncompiled one, on
// the CPU and (on the device machine) on a GPU, where the copies replay as CUDA graphs.
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { runNode } from './run_node.js';
import { settleGarbage } from '../settle_garbage.js';

const mesh = new dt.DeviceMesh('cpu', [0, 1]);

const values = async (t: dt.Tensor) => Array.from((await t.data()) as Float32Array);

// ~330 nodes (more than one segment), with a sharded matmul whose partial sums are reduced (a
// redistribute, whose plan is per node) and a rowwise sharded part
function block(x: dt.Tensor, w: dt.Tensor): dt.Tensor {
  let h = x;
  for (let k = 0; k < 40; k++) h = h.matmul(w).tanh().mul(0.5).add(x);
  const colSharded = h.redistribute([dt.Shard(1)]);
  const wRows = w.redistribute([dt.Shard(0)]);
  return colSharded.matmul(wRows).redistribute([dt.Replicate()]).softmax(-1);
}

afterEach(() => dt.graph.setEnabled(true));

describe('compiled calls', () => {
  it('replays a traced call with new arguments, bit for bit, without running the function', async () => {
    const w = dt.randn([8, 8], { seed: 1, mesh });
    let runs = 0;
    const f = dt.graph.compile((x: dt.Tensor) => {
      runs++;
      return dt.tidy(() => block(x, w));
    });
    const inputs = [1, 2, 3, 4, 5].map((seed) => dt.randn([4, 8], { seed: 10 + seed, mesh, placements: [dt.Shard(0)] }));
    const expected = await Promise.all(inputs.map((x) => values(dt.tidy(() => block(x, w)))));
    const got: number[][] = [];
    for (const x of inputs) {
      const y = f(x);
      expect(y.shape).toEqual([4, 8]);
      expect(y.placements).toEqual([dt.Replicate()]);
      got.push(await values(y));
      y.dispose();
    }
    expect(got).toEqual(expected);
    expect(runs).toBe(1);
    expect(f.stats).toMatchObject({ traces: 1, replays: 4, plainCalls: 0 });
    dt.dispose([w, ...inputs]);
  });

  it('traces each argument shape once, and rebuilds results of arrays and objects', async () => {
    const w = dt.randn([8, 8], { seed: 2, mesh });
    const f = dt.graph.compile((x: dt.Tensor, scale: number) => dt.tidy(() => ({ out: [x.matmul(w).mul(scale), x.sum()], scale })));
    const a = dt.randn([3, 8], { seed: 3, mesh });
    const b = dt.randn([5, 8], { seed: 4, mesh });
    for (let round = 0; round < 3; round++) {
      for (const [x, scale] of [[a, 2], [b, 2], [a, 3]] as const) {
        const r = f(x, scale);
        expect(r.scale).toBe(scale);
        expect(await values(r.out[0]!)).toEqual(await values(dt.tidy(() => x.matmul(w).mul(scale))));
        expect(await values(r.out[1]!)).toEqual(await values(dt.tidy(() => x.sum())));
        dt.dispose(r);
      }
    }
    expect(f.stats).toMatchObject({ traces: 3, replays: 6 });
    dt.dispose([w, a, b]);
  });

  it('traces again when a tensor it read is disposed (a replaced weight)', async () => {
    const layer = new nn.Linear(8, 4, { mesh }).compile();
    const x = dt.randn([2, 8], { seed: 6, mesh });
    dt.dispose([layer.call(x), layer.call(x)]);
    expect(layer.compileStats).toMatchObject({ traces: 1, replays: 1 });
    const weight = dt.randn([4, 8], { seed: 7, mesh });
    layer.setTensor('weight', weight.clone()); // the old weight goes: its trace cannot replay
    const y = layer.call(x);
    expect(await values(y)).toEqual(await values(dt.tidy(() => x.matmul(weight.transpose(0, 1)).add(layer.bias!))));
    expect(layer.compileStats).toMatchObject({ traces: 2, replays: 1 });
    dt.dispose([y, layer.call(x), weight, x]);
    expect(layer.compileStats).toMatchObject({ traces: 2, replays: 2 });
    layer.dispose();
  });

  it('runs as it is, and says why, a call that reads, makes host data or disposes an argument', async () => {
    const x = dt.randn([4], { seed: 8, mesh });
    const hostData = dt.graph.compile((t: dt.Tensor) => dt.tidy(() => t.add(dt.tensor([1, 2, 3, 4], { mesh }))));
    const reading = dt.graph.compile((t: dt.Tensor) => dt.tidy(() => t.mul(t.sum().itemSync() as number)));
    const disposing = dt.graph.compile((t: dt.Tensor) => {
      const y = t.add(1);
      t.dispose();
      return y;
    });
    for (let i = 0; i < 4; i++) {
      dt.dispose([hostData(x), reading(x)]);
      const own = x.clone();
      dt.dispose(disposing(own));
      expect(own.isDisposed).toBe(true);
    }
    expect(hostData.stats).toMatchObject({ traces: 0, replays: 0, plainCalls: 4 });
    expect(hostData.stats.lastRefusal).toMatch(/host data \(from_data/);
    expect(reading.stats).toMatchObject({ traces: 0, plainCalls: 4 });
    expect(reading.stats.lastRefusal).toMatch(/a read or a sync/);
    expect(disposing.stats).toMatchObject({ traces: 0, plainCalls: 4 });
    expect(disposing.stats.lastRefusal).toMatch(/disposes an argument/);
    x.dispose();
  });

  it('traces a call that fills a cache once the cache is full', async () => {
    const x = dt.randn([4], { seed: 9, mesh });
    let cache: dt.Tensor | undefined;
    const f = dt.graph.compile((t: dt.Tensor) => dt.tidy(() => t.mul((cache ??= dt.keep(dt.arange(4, undefined, 1, { mesh }))))));
    const outs = [f(x), f(x), f(x)];
    expect(f.stats).toMatchObject({ traces: 1, replays: 1, plainCalls: 1 });
    for (const y of outs) expect(await values(y)).toEqual(await values(dt.tidy(() => x.mul(cache!))));
    dt.dispose([...outs, x, cache!]);
  });

  it('leaves nothing behind when the function throws, and traces on the next call', async () => {
    const x = dt.randn([4], { seed: 10, mesh });
    let fail = true;
    const f = dt.graph.compile((t: dt.Tensor) =>
      dt.tidy(() => {
        const y = t.exp();
        if (fail) throw new Error('boom');
        return y;
      }),
    );
    await dt.sync();
    const live = dt.memory().numTensors;
    expect(() => f(x)).toThrow('boom');
    expect(dt.memory().numTensors).toBe(live);
    fail = false;
    const outs = [f(x), f(x)];
    expect(f.stats).toMatchObject({ traces: 1, replays: 1 });
    expect(await values(outs[1]!)).toEqual(await values(dt.tidy(() => x.exp())));
    dt.dispose([...outs, x]);
  });

  it('copies a call whose arguments alias only as they did when traced', async () => {
    const f = dt.graph.compile((a: dt.Tensor, b: dt.Tensor) => dt.tidy(() => a.mul(2).add(b)));
    const x = dt.randn([4], { seed: 11, mesh });
    const y = dt.randn([4], { seed: 12, mesh });
    const same = f(x, x); // traced with one tensor in both places
    const apart = f(x, y); // must not read x for y
    expect(await values(apart)).toEqual(await values(dt.tidy(() => x.mul(2).add(y))));
    expect(await values(same)).toEqual(await values(dt.tidy(() => x.mul(2).add(x))));
    expect(f.stats.replays).toBe(0);
    dt.dispose([same, apart, x, y]);
  });

  it('replays compiled calls inside a traced one, and keeps memory flat over 1,000 replays', async () => {
    const w = dt.randn([8, 8], { seed: 13, mesh });
    const inner = dt.graph.compile((t: dt.Tensor) => dt.tidy(() => t.matmul(w).tanh()));
    const outer = dt.graph.compile((t: dt.Tensor) => dt.tidy(() => inner(inner(t).add(t))));
    const x0 = dt.randn([4, 8], { seed: 14, mesh, placements: [dt.Shard(0)] });
    const reference = dt.tidy(() => {
      let r = x0;
      for (let i = 0; i < 1000; i++) r = r.matmul(w).tanh().add(r).matmul(w).tanh();
      return r;
    });
    dt.dispose(inner(x0)); // inner traced first: the outer trace holds copies of its trace
    dt.dispose(outer(x0)); // traced once
    expect(inner.stats).toMatchObject({ traces: 1, replays: 2 });
    await settleGarbage(); // what earlier tests dropped is freed before the count, not during it
    await dt.sync();
    const live = dt.memory();
    let x = x0;
    for (let i = 0; i < 1000; i++) {
      const next = outer(x);
      if (x !== x0) x.dispose();
      x = next;
      if (i % 100 === 99) await dt.sync();
    }
    expect(outer.stats).toMatchObject({ traces: 1, replays: 1000 });
    expect(await values(x)).toEqual(await values(reference));
    x.dispose();
    await dt.sync();
    expect(dt.memory().numTensors).toBe(live.numTensors);
    expect(dt.memory().numBytes).toBe(live.numBytes);
    dt.dispose([w, x0, reference]);
  });

  it('runs every call as it is while graphs are off', async () => {
    const f = dt.graph.compile((t: dt.Tensor) => dt.tidy(() => t.add(1)));
    const x = dt.randn([4], { seed: 15, mesh });
    dt.graph.setEnabled(false);
    dt.dispose([f(x), f(x)]);
    expect(f.stats).toMatchObject({ traces: 0, replays: 0, plainCalls: 2 });
    dt.graph.setEnabled(true);
    dt.dispose([f(x), f(x)]);
    expect(f.stats).toMatchObject({ traces: 1, replays: 1, plainCalls: 2 });
    x.dispose();
  });

  it('hands a copy over as its first part (DTORCH_REPLAY_HEAD_NODES), then in segments of DTORCH_REPLAY_SEGMENT_NODES nodes', () => {
    // a chain of 300 adds, copied on its second call: how many segments the copy took
    const script = `
      import * as dt from '@dtorch/api';
      const mesh = new dt.DeviceMesh('cpu', [0]);
      const f = dt.graph.compile((x) => dt.tidy(() => { let h = x; for (let k = 0; k < 300; k++) h = h.add(1); return h; }));
      const x = dt.zeros([4], { mesh });
      dt.dispose(f(x));
      await dt.sync();
      const before = dt.graph.stats().segments;
      const y = f(x);
      const values = Array.from(await y.data());
      console.log(JSON.stringify({ segments: dt.graph.stats().segments - before, values, stats: f.stats }));`;
    const copied = (env: Record<string, string>) => {
      const r = runNode(script, env);
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout.trim().split('\n').pop()!) as { segments: number; values: number[]; stats: dt.graph.CompiledStats };
    };
    const whole = copied({ DTORCH_REPLAY_HEAD_NODES: '0' }); // one segment, then the read's
    const headFirst = copied({}); // 300 compute nodes >= 64: the first part, the rest, the read's
    const shortCall = copied({ DTORCH_REPLAY_HEAD_NODES: '301' }); // fewer compute nodes than that: whole
    const cut = copied({ DTORCH_REPLAY_HEAD_NODES: '0', DTORCH_REPLAY_SEGMENT_NODES: '64' });
    for (const run of [whole, headFirst, shortCall, cut]) {
      expect(run.stats).toMatchObject({ traces: 1, replays: 1 });
      expect(run.values).toEqual([300, 300, 300, 300]);
    }
    expect(whole.segments).toBeLessThanOrEqual(2);
    expect(headFirst.segments).toBe(whole.segments + 1);
    expect(shortCall.segments).toBe(whole.segments);
    // 300 adds and their 299 releases in segments of 64 nodes: 10, then the read's
    expect(cut.segments).toBe(Math.ceil(599 / 64) + 1);
  });

  // On a GPU: a compiled chain of 800 ops called on three arguments (a graph per argument, as
  // layers alike with other weights), against running it; then the weights are freed (which
  // drops the graphs) and the GPU still makes and reads a host tensor
  const compiledChainScript = `
      import * as dt from '@dtorch/api';
      const mesh = new dt.DeviceMesh('cuda', [0]);
      const w = dt.randn([64, 64], { mesh, seed: 1, dtype: 'bfloat16' }).mul(0.1);
      const chain = (x) => dt.tidy(() => { let h = x; for (let k = 0; k < 200; k++) h = h.matmul(w).tanh().mul(0.5).add(x); return h; });
      const f = dt.graph.compile(chain);
      const xs = [1, 2, 3].map((seed) => dt.randn([64, 64], { mesh, seed: 10 + seed, dtype: 'bfloat16' }));
      const plain = [];
      for (const x of xs) { const y = chain(x); plain.push(Array.from(await y.to('float32').data())); y.dispose(); }
      let same = true;
      for (let round = 0; round < 4; round++) for (let i = 0; i < xs.length; i++) {
        const y = f(xs[i]);
        const got = Array.from(await y.to('float32').data());
        same &&= got.every((v, j) => v === plain[i][j]);
        y.dispose();
      }
      const graphs = dt.graph.stats();
      dt.dispose([w, ...xs]);
      const t = dt.tensor([1, 2, 3], { mesh });
      const after = Array.from(await t.data());
      console.log(JSON.stringify({ same, stats: f.stats, captured: graphs.captured, replays: graphs.replays, after }));`;
  const replayedLikeThePlainCall = (env: Record<string, string>) => {
    const r = runNode(compiledChainScript, env, 60_000);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.same).toBe(true);
    expect(out.stats).toMatchObject({ traces: 1, replays: 11, plainCalls: 0 });
    expect(out.captured).toBeGreaterThanOrEqual(3); // a graph of the copy per argument
    expect(out.replays).toBeGreaterThan(out.captured);
    expect(out.after).toEqual([1, 2, 3]);
  };
  it.runIf(dt.cuda.isAvailable())('replays a compiled call as CUDA graphs, one per argument, with the bits of the plain call (cuda)', () => {
    replayedLikeThePlainCall({ DTORCH_REPLAY_HEAD_NODES: '0' }); // the copy is one segment
  });
  it.runIf(dt.cuda.isAvailable())('replays a copy handed over as its first part and the rest with the bits of the plain call (cuda)', () => {
    replayedLikeThePlainCall({}); // 800 compute nodes: two segments, a graph of each
  });
  // Cut into several segments, the copy is captured as graphs on every argument while the
  // program reads earlier results: each read's pinned host block, freed on this thread, must not
  // have its LibTorch allocator event recorded on the stream being captured (run 2026-12-02-s33
  // failed here with "CUDA error: invalid argument" at a later read, before reads got a stream of
  // their own: external/cuda/device_sync.cpp, WorkerStreams::readback)
  it.runIf(dt.cuda.isAvailable())('replays a copy cut into segments on several arguments, reading each result (cuda)', () => {
    replayedLikeThePlainCall({ DTORCH_REPLAY_SEGMENT_NODES: '256' });
  });

  it('refuses bad input with a DTorchError', () => {
    expect(() => dt.graph.compile(42 as unknown as () => void)).toThrow(/expects a function, got number/);
    expect(() => dt.graph.compile(() => 1, { maxShapes: 0 })).toThrow(/maxShapes must be a positive integer, got 0/);
  });

  const clipConfig = () =>
    hf.CLIPTextConfig.fromDict({
      vocab_size: 99, hidden_size: 32, intermediate_size: 37, num_hidden_layers: 2, num_attention_heads: 4,
      max_position_embeddings: 16, hidden_act: 'quick_gelu', eos_token_id: 2,
    });
  const prompts = [
    [5, 17, 33, 98, 2, 0, 0, 0],
    [9, 8, 7, 6, 5, 4, 98, 2],
    [1, 98, 2, 3, 3, 3, 3, 3],
  ];

  // each prompt's last hidden state and pooled output, as bytes, from `model.call`
  async function encodeAll(model: hf.CLIPTextModel, ids: dt.Tensor[]): Promise<Buffer[][]> {
    const bytes = async (t: dt.Tensor) => Buffer.from(((await t.to('float32').data()) as Float32Array).buffer);
    const all: Buffer[][] = [];
    for (const t of ids) {
      const out = model.call(t);
      all.push([await bytes(out.lastHiddenState), await bytes(out.poolerOutput)]);
      dt.dispose(out);
    }
    return all;
  }

  for (const kind of ['cpu', 'cuda'] as const) {
    const runs = kind === 'cpu' || dt.cuda.isAvailable();
    it.runIf(runs)(`gives a compiled CLIP text model the bits of the uncompiled one (${kind})`, async () => {
      const one = new dt.DeviceMesh(kind, [0]);
      const model = new hf.CLIPTextModel(clipConfig(), { mesh: one, ...(kind === 'cuda' ? { dtype: 'bfloat16' as const } : {}) });
      const ids = prompts.map((p) => dt.tensor([p], { dtype: 'int64', mesh: one }));
      const plain = await encodeAll(model, ids);
      model.compile();
      const before = dt.graph.stats();
      for (let round = 0; round < 3; round++) expect(await encodeAll(model, ids)).toEqual(plain);
      expect(model.compileStats).toMatchObject({ traces: 1, replays: 8, plainCalls: 0 });
      if (kind === 'cuda') expect(dt.graph.stats().replays - before.replays).toBeGreaterThanOrEqual(6); // the copies run as CUDA graphs
      dt.dispose(ids);
      model.dispose();
    });
  }
});
