// CUDA graphs (native/core/kernel_stream/graph_replays): a GPU worker captures the spans of a
// repeated segment on their second run and replays them from then on (of a span that would copy
// too much, its runs of small kernels). What it replays is bit-identical to the kernel-by-kernel
// run; memory stays flat over 1,000 replays; a new shape is a new graph, and a graph whose fixed
// input (a weight) was freed goes with it; an op that cannot be captured fails as it would
// without graphs, naming the op, and later work still replays.
// Skipped without a GPU (run on the device machine).
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { settleGarbage } from '../settle_garbage.js';

const gpu = dt.cuda.isAvailable();
const mesh = gpu ? new dt.DeviceMesh('cuda', [0]) : undefined;

// one step of varied work on x [rows, width]: matmuls, norms, softmax, activations, reshapes
// (60-odd kernels)
function stepOf(x: dt.Tensor, w: dt.Tensor, b: dt.Tensor): dt.Tensor {
  const [rows, width] = x.shape as [number, number];
  let h = x;
  for (let k = 0; k < 6; k++) {
    const a = dt.functional.gelu(h.matmul(w).add(b));
    const s = a.reshape([rows, 2, width / 2]).softmax(-1).reshape([rows, width]);
    h = dt.functional.layerNorm(s.mul(h).add(x), [width]).tanh().mul(0.9).add(h.mul(0.1));
  }
  return h;
}

async function bytesOf(t: dt.Tensor): Promise<Buffer> {
  const values = (await t.data()) as Float32Array;
  return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
}

// `steps` steps from the same start, each step's result read back as bytes
async function runSteps(steps: number, w: dt.Tensor, b: dt.Tensor, x0: dt.Tensor): Promise<Buffer[]> {
  let x = x0.clone();
  const out: Buffer[] = [];
  for (let i = 0; i < steps; i++) {
    const next = dt.graph.step(() => dt.tidy(() => stepOf(x, w, b)));
    x.dispose();
    x = next;
    out.push(await bytesOf(x));
  }
  x.dispose();
  return out;
}

describe.skipIf(!gpu)('CUDA graphs', () => {
  afterEach(() => dt.graph.setEnabled(true));

  it('replays the spans of a repeated step, bit-identical to running kernel by kernel', async () => {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const w = dt.randn([64, 64], { seed: 1, mesh, dtype }).mul(0.1);
      const b = dt.randn([64], { seed: 2, mesh, dtype });
      const x0 = dt.randn([4, 64], { seed: 3, mesh, dtype });
      const before = dt.graph.stats();
      const replayed = await runSteps(12, w, b, x0);
      const after = dt.graph.stats();
      expect(after.captured - before.captured, JSON.stringify(after)).toBeGreaterThanOrEqual(1);
      // captured on step 2, replayed from step 3 on
      expect(after.replays - before.replays, JSON.stringify(after)).toBeGreaterThanOrEqual(10);
      expect(after.fallbacks - before.fallbacks).toBe(0);
      dt.graph.setEnabled(false);
      const eager = await runSteps(12, w, b, x0);
      expect(dt.graph.stats().replays).toBe(after.replays);  // nothing replayed while off
      dt.graph.setEnabled(true);
      for (let i = 0; i < 12; i++) expect(replayed[i]!.equals(eager[i]!), `${dtype} step ${i + 1}`).toBe(true);
      dt.dispose([w, b, x0]);
    }
  });

  it('replays the denoising steps of a tiny Flux pipeline, and the image is the same bits', async () => {
    const pipe = await hf.FluxPipeline.tiny({ mesh });
    const call = { prompt: 'a cat', height: 64, width: 64, numInferenceSteps: 8, seed: 5, outputType: 'latent' as const };
    const before = dt.graph.stats();
    const withGraphs = (await pipe.generate(call)).images;
    const replays = dt.graph.stats().replays - before.replays;
    expect(replays, JSON.stringify(dt.graph.stats())).toBeGreaterThanOrEqual(6);
    dt.graph.setEnabled(false);
    const without = (await pipe.generate(call)).images;
    expect((await bytesOf(withGraphs)).equals(await bytesOf(without))).toBe(true);
    dt.dispose([withGraphs, without]);
    pipe.dispose();
  });

  it('captures the small kernels of a span that copies too much on their own, bit-identical', async () => {
    // each step: a small part (stepOf on [4, 64], the size of a timestep embedding) and a large
    // one (16 MiB in and 16 MiB out), in one span whose replay would copy more than
    // DTORCH_GRAPH_COPY_LIMIT_MB (16): the large kernels run one by one, the small ones from a graph
    const w = dt.randn([64, 64], { seed: 15, mesh }).mul(0.1);
    const b = dt.randn([64], { seed: 16, mesh });
    const big0 = dt.randn([2048, 2048], { seed: 17, mesh });
    const t0 = dt.randn([4, 64], { seed: 18, mesh });
    // no read inside the loop: every step after the first is cut into the same segments
    const run = async (steps: number) => {
      let big = big0.clone();
      const smalls = [t0.clone()];
      for (let i = 0; i < steps; i++) {
        const t = smalls[smalls.length - 1]!;
        const [nextBig, nextT] = dt.graph.step(() =>
          dt.tidy(() => {
            const small = stepOf(t, w, b);
            return [big.mul(0.5).add(small.mean()), small];
          }),
        );
        big.dispose();
        big = nextBig!;
        smalls.push(nextT!);
      }
      const out = await Promise.all([...smalls, big].map(bytesOf));
      dt.dispose([...smalls, big]);
      return out;
    };
    const before = dt.graph.stats();
    const pieces = await run(10);
    const after = dt.graph.stats();
    // the whole span is seen, then found too large; its small run is seen, then captured and replayed
    expect(after.captured - before.captured, JSON.stringify(after)).toBeGreaterThanOrEqual(1);
    expect(after.replays - before.replays, JSON.stringify(after)).toBeGreaterThanOrEqual(5);
    expect(after.fallbacks - before.fallbacks).toBe(0);
    dt.graph.setEnabled(false);
    const eager = await run(10);
    dt.graph.setEnabled(true);
    for (let i = 0; i < pieces.length; i++) expect(pieces[i]!.equals(eager[i]!), `tensor ${i}`).toBe(true);
    dt.dispose([w, b, big0, t0]);
  });

  it('keeps memory flat over 1,000 replays', async () => {
    const w = dt.randn([64, 64], { seed: 4, mesh }).mul(0.1);
    const b = dt.randn([64], { seed: 5, mesh });
    let x = dt.randn([4, 64], { seed: 6, mesh });
    // settled first, so tensors earlier tests dropped are freed before a sample, not between two
    // (on the H200 that once took allocated bytes from 50,432 down to 17,664 mid-loop)
    const sample = async () => {
      await settleGarbage();
      await dt.sync();
      const all = dt.memory();
      const device = all.perDevice.find((d) => d.device === 'cuda:0')!;
      return {
        tensors: all.numTensors,
        deviceTensors: device.numTensors,
        liveGraphs: dt.graph.stats().liveGraphs,
        allocated: device.allocatedBytes,
        graphBytes: device.graphBytes,
        cuda: dt.cuda.memoryStats(0).allocatedBytes,
      };
    };
    const stepOnce = () => {
      const next = dt.graph.step(() => dt.tidy(() => stepOf(x, w, b)));
      x.dispose();
      x = next;
    };
    for (let i = 0; i < 50; i++) stepOnce();
    const warm = await sample();
    const replaysBefore = dt.graph.stats().replays;
    for (let i = 0; i < 1000; i++) stepOnce();
    const after = await sample();
    const seen = JSON.stringify({ warm, after });
    expect(dt.graph.stats().replays - replaysBefore).toBeGreaterThanOrEqual(1000);
    // the live count is exact; bytes must not grow (a free the allocator makes late may lower them)
    expect({ tensors: after.tensors, deviceTensors: after.deviceTensors, liveGraphs: after.liveGraphs }, seen).toEqual({
      tensors: warm.tensors,
      deviceTensors: warm.deviceTensors,
      liveGraphs: warm.liveGraphs,
    });
    expect(after.allocated, seen).toBeLessThanOrEqual(warm.allocated);
    expect(after.graphBytes, seen).toBeLessThanOrEqual(warm.graphBytes);
    expect(after.cuda, seen).toBeLessThanOrEqual(warm.cuda);
    expect(after.graphBytes).toBeGreaterThan(0);
    dt.dispose([w, b, x]);
  });

  it('captures a new graph for a new shape, and drops a graph with the weight it read', async () => {
    // width 48: a step no earlier test ran, so its weights are fixed inputs (made before it first ran)
    const b = dt.randn([48], { seed: 8, mesh });
    const w1 = dt.randn([48, 48], { seed: 7, mesh }).mul(0.1);
    const x0 = dt.randn([4, 48], { seed: 9, mesh });
    await runSteps(4, w1, b, x0);
    const withW1 = dt.graph.stats();
    const w2 = dt.randn([48, 48], { seed: 10, mesh }).mul(0.1);
    const second = await runSteps(4, w2, b, x0); // other weights: another graph of the same span
    const withW2 = dt.graph.stats();
    expect(withW2.captured, JSON.stringify(withW2)).toBeGreaterThan(withW1.captured);
    w1.dispose();
    await dt.sync();
    expect(dt.graph.stats().liveGraphs).toBeLessThan(withW2.liveGraphs);
    // the values with w2 are still those of running kernel by kernel
    dt.graph.setEnabled(false);
    const eager = await runSteps(4, w2, b, x0);
    for (let i = 0; i < 4; i++) expect(second[i]!.equals(eager[i]!)).toBe(true);
    dt.graph.setEnabled(true);
    // a new batch size: a new segment, captured on its own
    const x8 = dt.randn([8, 48], { seed: 11, mesh });
    const capturedBefore = dt.graph.stats().captured;
    for (let i = 0; i < 4; i++) dt.dispose(dt.graph.step(() => dt.tidy(() => stepOf(x8, w2, b))));
    await dt.sync();
    expect(dt.graph.stats().captured).toBeGreaterThan(capturedBefore);
    dt.dispose([b, w2, x0, x8]);
  });

  it('leaves a span that cannot be captured to run kernel by kernel: its failure names the op, and later work replays', async () => {
    const w = dt.randn([64, 64], { seed: 12, mesh }).mul(0.1);
    const b = dt.randn([64], { seed: 13, mesh });
    const x = dt.randn([4, 64], { seed: 14, mesh });
    const fallbacksBefore = dt.graph.stats().fallbacks;
    // three steps of a loop, read after it: the third is captured (16 PiB: no GPU holds it, so the
    // allocation fails there, and at run time on the worker). Steps after the first are cut
    // full-sized, so the huge tensor is made and freed inside one span and nothing of it is copied.
    const failing = Array.from({ length: 3 }, () => dt.graph.step(() => dt.tidy(() => stepOf(x, w, b).add(dt.empty([2 ** 52], { mesh }).narrow(0, 0, 64)))));
    for (const f of failing) {
      const rejection = await f.data().catch((e: unknown) => e);
      expect((rejection as dt.DTorchError).code).toBe('KERNEL_FAILED');
      expect((rejection as Error).message).toMatch(/^empty failed: /);
      f.dispose();
    }
    expect(dt.graph.stats().fallbacks).toBeGreaterThan(fallbacksBefore);
    const replaysBefore = dt.graph.stats().replays;
    const healthy = await runSteps(5, w, b, x);
    expect(dt.graph.stats().replays).toBeGreaterThan(replaysBefore);
    dt.graph.setEnabled(false);
    const eager = await runSteps(5, w, b, x);
    for (let i = 0; i < 5; i++) expect(healthy[i]!.equals(eager[i]!)).toBe(true);
    dt.dispose([w, b, x]);
  });
});
