// A CUDA mesh over two processes (needs a GPU; skipped otherwise): this test process offers its
// cuda:0 as node 0, a `dtorch worker` child offers the same GPU as node 1 (two processes may share
// one), and the mesh [0, 1] spans them. Its collectives go through c10d's Gloo by way of the host
// (NCCL between processes is not built yet); random ops and redistributes, and a tiny Flux
// generate with Ulysses attention across the processes, each equal the same work on one GPU.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { cudaSkip, skipNote } from '../conformance/meshes.js';
import { drawCase, expectCaseLikeOneDevice } from '../distributed/op_cases.js';
import { Gen, numel, propertySeed } from '../distributed/random.js';
import { startWorker, stopAll, type Child } from './cluster_processes.js';

const skip = cudaSkip(1);
let worker: Child | undefined;
let one: dt.DeviceMesh;
let spanning: dt.DeviceMesh;

beforeAll(async () => {
  if (skip) return;
  await dt.cluster.start({
    workers: 1,
    devices: [{ kind: 'cpu', index: 0 }, { kind: 'cuda', index: 0 }],
    joinTimeoutMs: 60_000,
    onListening: (address) => (worker = startWorker(address, { devices: 'cuda:0' })),
  });
  expect(dt.cluster.devices('cuda').map((d) => `${d.node}/${d.device}=${d.index}`)).toEqual(['0/cuda:0=0', '1/cuda:0=1']);
  one = new dt.DeviceMesh('cuda', [0]);
  spanning = new dt.DeviceMesh('cuda', [0, 1]);
}, 90_000);

afterAll(async () => {
  if (skip) return;
  await dt.cluster.shutdown('tests done');
  expect((await worker!.exited).code, worker!.output()).toBe(0);
  stopAll();
}, 30_000);

describe(`a CUDA mesh over two processes${skipNote(skip)}`, () => {
  it.skipIf(skip)('redistributes between random placements and back, exactly: 40 cases', async () => {
    const g = new Gen(propertySeed + 21);
    for (let i = 0; i < 40; i++) {
      const shape = g.shape(0, 3);
      const [from, to] = [g.placements(spanning, shape.length), g.placements(spanning, shape.length)];
      const what = `case ${i}: shape [${shape}]: ${dt.formatPlacements(from)} -> ${dt.formatPlacements(to)}`;
      const values = g.values(numel(shape));
      const x = dt.tensor(values, { shape, mesh: spanning, placements: from });
      const y = x.redistribute(to);
      const back = y.redistribute(from);
      for (const t of [x, y, back]) expect(Array.from((await t.data()) as Float32Array), what).toEqual(values);
      dt.dispose([x, y, back]);
    }
  }, 120_000);

  it.skipIf(skip)('gives random ops under random placements the one-GPU result: 60 cases', async () => {
    const g = new Gen(propertySeed + 22);
    let legal = 0;
    for (let i = 0; i < 60; i++) {
      const c = drawCase(g, spanning, i, propertySeed + 22);
      const refused = await expectCaseLikeOneDevice(c, spanning, one);
      if (refused) expect(refused.code, `${c.what}: ${refused.message}`).toBe('PLACEMENT_MISMATCH'); // at the call, as on one host
      else legal++;
    }
    expect(legal).toBeGreaterThan(20);
  }, 120_000);

  it.skipIf(skip)("runs a tiny Flux pipeline's generate with ulysses=2 across the processes, as on one GPU", async () => {
    const call = { prompt: 'a photo of a cat', numInferenceSteps: 2, height: 32, width: 32, seed: 7, outputType: 'latent' as const };
    const alone = await hf.FluxPipeline.tiny({ mesh: one });
    const want = (await ((await alone.generate(call)).images as dt.Tensor).data()) as Float32Array;
    const spread = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cuda', [0, 1], ['ulysses']) });
    const got = (await ((await spread.generate(call)).images as dt.Tensor).data()) as Float32Array;
    let worst = 0;
    got.forEach((v, k) => (worst = Math.max(worst, Math.abs(v - want[k]!))));
    expect(worst).toBeLessThanOrEqual(1e-4);
    alone.dispose();
    spread.dispose();
  }, 120_000);
});
