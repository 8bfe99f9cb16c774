// The controller recognises a segment it has lowered before (core/runner/repeated_segments,
// dt.graph.stats): the steps of a loop marked with dt.graph.step, or delimited by reads without a
// mark, come out as the same segments and are recognised after the first; a change of shape,
// placement, mesh, attribute or input role is a new segment; the values are the ones the ops
// give (recognition changes nothing); DTORCH_GRAPHS=0 turns it off; a model's call() marked as
// a step and a tiny Flux pipeline's denoising steps are recognised; a step waited for starts
// with a short segment, a step of a busy loop with a full one.
import { beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { Transformer } from '../nn/models.js';
import { runNode } from './run_node.js';

const mesh = new dt.DeviceMesh('cpu', [0, 1]);

// a segment of one sync node, as every dt.sync() after the first makes: seen before
beforeAll(async () => {
  await dt.sync();
  await dt.sync();
});

// dt.graph.stats() once the controller has lowered what was recorded so far, less `before` and
// the sync segment that waits for it
type Recognised = Pick<dt.graph.GraphStats, 'segments' | 'nodes' | 'repeats' | 'repeatedNodes' | 'distinct'>;
async function statsSince(before: dt.graph.GraphStats): Promise<Recognised> {
  await dt.sync();
  const now = dt.graph.stats();
  return {
    segments: now.segments - before.segments - 1,
    nodes: now.nodes - before.nodes - 1,
    repeats: now.repeats - before.repeats - 1,
    repeatedNodes: now.repeatedNodes - before.repeatedNodes - 1,
    distinct: now.distinct,
  };
}

// one step: a few hundred nodes, so that it spans several segments
function stepOf(x: dt.Tensor, w: dt.Tensor): dt.Tensor {
  let h = x;
  for (let k = 0; k < 60; k++) h = h.matmul(w).tanh().mul(0.5).add(x);
  return h;
}

describe('repeated segments', () => {
  it('recognises every step of a dt.graph.step loop after the first, and the values are unchanged', async () => {
    const w = dt.randn([8, 8], { seed: 1, mesh });
    let x = dt.randn([4, 8], { seed: 2, mesh, placements: [dt.Shard(0)] });
    const reference = dt.tidy(() => stepOf(stepOf(stepOf(x, w), w), w));
    await dt.sync();
    const before = dt.graph.stats();
    const steps = 12;
    const results: dt.Tensor[] = [];
    for (let i = 0; i < steps; i++) {
      const next = dt.graph.step(() => dt.tidy(() => stepOf(x, w)));
      if (i > 0) x.dispose();
      x = next;
      if (i === 2) results.push(dt.tidy(() => x.clone()));
    }
    const s = await statsSince(before);
    // the first step, after the sync, is cut as a step waited for (short segments first); every
    // later step starts full-sized segments afresh, so steps 3..12 repeat step 2's
    expect(s.repeats, JSON.stringify(s)).toBeGreaterThanOrEqual((steps - 2) * 2);
    expect(s.repeatedNodes / s.nodes, JSON.stringify(s)).toBeGreaterThan((steps - 2.2) / steps);
    // from step 3 on, the controller queues the kernels it lowered for step 2 again
    expect(dt.graph.stats().reusedLowerings - before.reusedLowerings).toBeGreaterThanOrEqual((steps - 2) * 2);
    expect(Array.from((await results[0]!.data()) as Float32Array)).toEqual(Array.from((await reference.data()) as Float32Array));
    dt.dispose([w, x, reference, ...results]);
  });

  it('recognises the steps of a loop delimited by reads, without a mark', async () => {
    const w = dt.randn([8, 8], { seed: 3, mesh });
    let x = dt.randn([4, 8], { seed: 4, mesh });
    await dt.sync();
    const before = dt.graph.stats();
    for (let i = 0; i < 8; i++) {
      const next = dt.tidy(() => stepOf(x, w));
      x.dispose();
      x = next;
      await x.sum().data(); // a read: the next segments start small again
    }
    const s = await statsSince(before);
    expect(s.repeatedNodes / s.nodes, JSON.stringify(s)).toBeGreaterThan(0.6);
    dt.dispose([w, x]);
  });

  it('tells apart what differs: a shape, a placement, a mesh, an attribute, an input role', async () => {
    const other = new dt.DeviceMesh('cpu', [1, 0]);
    const variants: [string, () => void][] = [
      ['the base', () => void dt.ones([4, 8], { mesh }).mul(2).add(1)],
      ['a shape', () => void dt.ones([4, 9], { mesh }).mul(2).add(1)],
      ['a placement', () => void dt.ones([4, 8], { mesh, placements: [dt.Shard(0)] }).mul(2).add(1)],
      ['a mesh', () => void dt.ones([4, 8], { mesh: other }).mul(2).add(1)],
      ['an attribute', () => void dt.ones([4, 8], { mesh }).mul(3).add(1)],
      [
        'an input role',
        () => {
          const a = dt.ones([4, 8], { mesh });
          const b = a.mul(2);
          void b.add(b); // add reads b twice instead of once
        },
      ],
    ];
    for (const [what, record] of variants) {
      // each variant twice: the second is a repeat, the first is new
      const before = dt.graph.stats();
      dt.graph.step(() => dt.tidy(record));
      const first = await statsSince(before);
      expect(first.repeats, `${what}: ${JSON.stringify(first)}`).toBe(0);
      const again = dt.graph.stats();
      dt.graph.step(() => dt.tidy(record));
      const second = await statsSince(again);
      expect(second.repeats, `${what} again: ${JSON.stringify(second)}`).toBe(second.segments);
    }
  });

  it('recognises the denoising steps of a tiny Flux pipeline', async () => {
    const pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [0, 1], ['ulysses']) });
    const call = { prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 6, seed: 5, outputType: 'latent' as const };
    dt.dispose((await pipe.generate(call)).images); // the first run: everything new
    await dt.sync();
    const before = dt.graph.stats();
    dt.dispose((await pipe.generate(call)).images);
    const s = await statsSince(before);
    // the same call again: its encoders, steps and decode are all recognised
    expect(s.repeatedNodes / s.nodes, JSON.stringify(s)).toBeGreaterThan(0.9);
    pipe.dispose();
  });

  it('starts a step waited for with a short segment: the idle worker runs its first ops while the program records', async () => {
    await dt.sync();
    const allocated = () => dt.memory().perDevice.reduce((sum, d) => sum + d.allocatedBytes, 0);
    const start = allocated();
    const made: dt.Tensor[] = [];
    let ran = false;
    dt.graph.step(() => {
      // 40 ops, fewer than a full segment: the first 32 go to the worker at once
      for (let i = 0; i < 40; i++) made.push(dt.full([1 << 18], i, { mesh }));
      const deadline = Date.now() + 5000;
      while (!ran && Date.now() < deadline) ran = allocated() >= start + 32 * (1 << 20); // no await: still recording
    });
    expect(ran).toBe(true);
    // a step that follows another, busy, is cut full-sized: the same ops again are one segment
    await dt.sync();
    const before = dt.graph.stats();
    dt.graph.step(() => void made.push(dt.full([1 << 18], 0, { mesh }))); // after the wait: one short segment
    dt.graph.step(() => {
      for (let i = 0; i < 40; i++) made.push(dt.full([1 << 18], i, { mesh }));
    });
    const s = await statsSince(before);
    expect(s.segments, JSON.stringify(s)).toBe(2);
    expect(s.nodes, JSON.stringify(s)).toBe(41);
    dt.dispose(made);
  });

  it("recognises a model's call() marked as a step and made again on the same shapes, whole", async () => {
    const model = new Transformer(mesh, true);
    const ids = dt.tensor([1, 2, 3, 4, 5, 6, 7, 8], { shape: [2, 4], dtype: 'int64', mesh });
    dt.dispose(dt.graph.step(() => model.call(ids))); // the first call: new
    await dt.sync();
    const before = dt.graph.stats();
    dt.dispose(dt.graph.step(() => model.call(ids)));
    const s = await statsSince(before);
    expect(s.repeats, JSON.stringify(s)).toBe(s.segments);
    expect(s.nodes).toBeGreaterThan(50);
    dt.dispose(ids);
    model.dispose();
  });

  it('reuses a lowering only where it frees the same: a release the signature leaves out lands on its own mesh', async () => {
    const other = new dt.DeviceMesh('cpu', [2, 3]);
    const w = dt.randn([8, 8], { seed: 3, mesh });
    let x = dt.randn([4, 8], { seed: 4, mesh });
    const devices = ['cpu:0', 'cpu:1', 'cpu:2', 'cpu:3'];
    const allocated = () => devices.map((name) => dt.memory().perDevice.find((d) => d.device === name)!.allocatedBytes);
    await dt.sync();
    const baseline = allocated();
    const before = dt.graph.stats();
    const reference: number[][] = [];
    for (let i = 0; i < 10; i++) {
      // a tensor the step never reads, let go inside it: on `mesh` one step, on `other` the next
      const junk = dt.ones([16, 16], { mesh: i % 2 === 0 ? mesh : other });
      await dt.sync();
      const next = dt.graph.step(() => {
        const y = dt.tidy(() => stepOf(x, w));
        junk.dispose();
        return y;
      });
      x.dispose();
      x = next;
      reference.push(Array.from((await x.data()) as Float32Array));
    }
    const s = dt.graph.stats();
    expect(s.reusedLowerings - before.reusedLowerings, JSON.stringify(s)).toBeGreaterThan(0);
    await dt.sync();
    expect(allocated()).toEqual(baseline); // every junk tensor was freed, on its own mesh
    // the same values as computed again with recognition off
    dt.graph.setEnabled(false);
    try {
      let y = dt.randn([4, 8], { seed: 4, mesh });
      for (let i = 0; i < 10; i++) {
        const next = dt.tidy(() => stepOf(y, w));
        y.dispose();
        y = next;
        expect(Array.from((await y.data()) as Float32Array)).toEqual(reference[i]);
      }
      y.dispose();
    } finally {
      dt.graph.setEnabled(true);
    }
    dt.dispose([w, x]);
  });

  it("recognises a model called again and again in a loop, without marks or reads (each large call starts a step)", async () => {
    const model = new Transformer(mesh, true);
    const ids = dt.tensor([1, 2, 3, 4, 5, 6, 7, 8], { shape: [2, 4], dtype: 'int64', mesh });
    const reference = model.call(ids);
    const expected = Array.from((await reference.data()) as Float32Array);
    reference.dispose();
    dt.dispose(model.call(ids));
    await dt.sync();
    const before = dt.graph.stats();
    const outputs: dt.Tensor[] = [];
    for (let i = 0; i < 8; i++) outputs.push(model.call(ids)); // no read, no await, no dt.graph.step
    const s = await statsSince(before);
    // the first call, after the sync, is cut as a call waited for; all later calls but the last
    // one's tail (which the sync's segment holds) repeat the second
    expect(s.repeats, JSON.stringify(s)).toBeGreaterThanOrEqual(s.segments - 3);
    expect(s.repeatedNodes / s.nodes, JSON.stringify(s)).toBeGreaterThan(0.75);
    for (const out of outputs) expect(Array.from((await out.data()) as Float32Array)).toEqual(expected);
    dt.dispose([...outputs, ids]);
    model.dispose();
  });

  it('does not cut a segment at every call of a tiny layer', async () => {
    const layer = new nn.Linear(4, 4, { mesh });
    const x = dt.ones([2, 4], { mesh });
    await dt.sync();
    const before = dt.graph.stats();
    for (let i = 0; i < 300; i++) dt.dispose(layer.call(x));
    const s = await statsSince(before);
    expect(s.nodes).toBeGreaterThanOrEqual(600);
    expect(s.segments, JSON.stringify(s)).toBeLessThan(30); // about nodes / 256, not one per call
    dt.dispose(x);
    layer.dispose();
  });

  it('is off with DTORCH_GRAPHS=0', () => {
    const script = `
      import * as dt from '@dtorch/api';
      const mesh = new dt.DeviceMesh('cpu', [0]);
      for (let i = 0; i < 5; i++) dt.graph.step(() => dt.tidy(() => void dt.ones([3], { mesh }).add(1)));
      await dt.sync();
      console.log(JSON.stringify(dt.graph.stats()));`;
    const on = runNode(script, {});
    const off = runNode(script, { DTORCH_GRAPHS: '0' });
    expect(JSON.parse(on.stdout.trim()).repeats, on.stderr).toBeGreaterThanOrEqual(4);
    expect(JSON.parse(off.stdout.trim()), off.stderr).toMatchObject({ segments: 0, nodes: 0, repeats: 0, repeatedNodes: 0, distinct: 0, enabled: false });
  });

  it('is switched off and on again with dt.graph.setEnabled, and refuses what is not a boolean', async () => {
    const one = new dt.DeviceMesh('cpu', [0]);
    const run = async (): Promise<Recognised> => {
      const before = dt.graph.stats();
      for (let i = 0; i < 5; i++) dt.graph.step(() => dt.tidy(() => void dt.ones([3], { mesh: one }).add(2)));
      return statsSince(before);
    };
    expect(dt.graph.enabled()).toBe(true);
    dt.graph.setEnabled(false);
    try {
      expect(dt.graph.enabled()).toBe(false);
      const off = await run();
      // nothing signed: not even the sync that waits is counted
      expect(off.segments).toBe(-1);
      expect(off.repeats).toBe(-1);
    } finally {
      dt.graph.setEnabled(true);
    }
    expect((await run()).repeats).toBeGreaterThanOrEqual(4);
    expect(() => dt.graph.setEnabled('no' as unknown as boolean)).toThrow(/expects true or false, got string/);
    expect(dt.graph.enabled()).toBe(true);
  });
});
