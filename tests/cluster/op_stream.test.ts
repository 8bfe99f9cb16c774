// The op stream with real processes on 127.0.0.1: this test process is the main node (with its
// cpu:0 in the cluster), and 2 `dtorch worker` children join with 2 CPU devices each. Meshes over
// the workers' devices (two ranks on each, a 2x2 grid whose dims run across and within the
// nodes, one rank per node) and one that takes in the main node's device run a subset of the op
// conformance suite, random ops under random placements and the redistribute property suite, a
// tensor-parallel transformer from @dtorch/nn, a tiny Flux transformer on sequence-parallel meshes
// whose Ulysses all-to-alls and ring passes cross the nodes in uneven pieces, and a tiny
// pipeline's generate (Ulysses and ring attention across the nodes), each equal to the same work
// on this process's one device (or PyTorch's fixture); and reads answered by two nodes in flight at
// once, a slow one on one worker and a fast one on the other, each given its own value. Between the processes tensors
// move only through c10d's Gloo groups. Ports are free ones (port 0); every child is ended.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { expectValues, fixture, run } from '../conformance/fixture_cases.js';
import { drawCase, expectCaseLikeOneDevice } from '../distributed/op_cases.js';
import { Gen, numel, propertySeed } from '../distributed/random.js';
import { fixtureTensor } from '../fixture_tensors.js';
import { settleGarbage } from '../settle_garbage.js';
import { Transformer } from '../nn/models.js';
import { startWorker, stopAll, within, type Child } from './cluster_processes.js';

let workers: Child[] = [];
let one: dt.DeviceMesh;
let meshes: dt.DeviceMesh[];

beforeAll(async () => {
  await dt.cluster.start({
    workers: 2,
    devices: [{ kind: 'cpu', index: 0 }],
    joinTimeoutMs: 30_000,
    onListening: (address) => (workers = [startWorker(address, { devices: 'cpu:0-1' }), startWorker(address, { devices: 'cpu:0-1' })]),
  });
  // cluster cpu devices: 0 is this process's, 1-2 node 1's, 3-4 node 2's
  expect(dt.cluster.devices('cpu').map((d) => `${d.node}/${d.device}`)).toEqual(['0/cpu:0', '1/cpu:0', '1/cpu:1', '2/cpu:0', '2/cpu:1']);
  one = new dt.DeviceMesh('cpu', [0]);
  meshes = [
    new dt.DeviceMesh('cpu', [1, 2, 3, 4]),
    new dt.DeviceMesh('cpu', [[1, 2], [3, 4]], ['dp', 'tp']), // dim 0 across the nodes, dim 1 within each
    new dt.DeviceMesh('cpu', [[1, 3], [2, 4]], ['dp', 'tp']), // dim 1 across the nodes
    new dt.DeviceMesh('cpu', [1, 3]),
    new dt.DeviceMesh('cpu', [0, 2, 3]), // this process holds rank 0 and answers the reads
  ];
}, 60_000);

afterAll(async () => {
  await dt.cluster.shutdown('tests done');
  for (const w of workers) expect((await w.exited).code, w.output()).toBe(0);
  stopAll();
}, 30_000);

describe('meshes over 2 worker processes', () => {
  it('run every op conformance case (Replicate), each equal to PyTorch', async () => {
    for (const mesh of [meshes[0]!, meshes[4]!]) {
      for (const c of fixture.cases) {
        const out = run(c, mesh);
        try {
          expectValues(await out.array(), out, c.expected);
        } catch (err) {
          throw new Error(`case "${c.name}" on ${mesh}: ${(err as Error).message}`);
        }
        out.dispose();
      }
    }
  }, 120_000);

  it('give random ops under random input placements the single-device result: 150 cases', async () => {
    const g = new Gen(propertySeed + 11);
    let legal = 0;
    for (let i = 0; i < 150; i++) {
      const mesh = g.pick(meshes);
      const c = drawCase(g, mesh, i, propertySeed + 11);
      const refused = await expectCaseLikeOneDevice(c, mesh, one);
      if (refused) expect(refused.code, `${c.what}: ${refused.message}`).toBe('PLACEMENT_MISMATCH'); // at the call, as on one host
      else legal++;
    }
    expect(legal).toBeGreaterThan(50);
  }, 120_000);

  it('redistribute between random placements and back, exactly: 100 cases', async () => {
    const g = new Gen(propertySeed + 12);
    for (let i = 0; i < 100; i++) {
      const mesh = g.pick(meshes);
      const shape = g.shape(0, 3);
      const [from, to] = [g.placements(mesh, shape.length), g.placements(mesh, shape.length)];
      const what = `case ${i}: shape [${shape}] on ${mesh}: ${dt.formatPlacements(from)} -> ${dt.formatPlacements(to)}`;
      const values = g.values(numel(shape));
      const x = dt.tensor(values, { shape, mesh, placements: from });
      const y = x.redistribute(to);
      const back = y.redistribute(from);
      for (const t of [x, y, back]) expect(Array.from((await t.data()) as Float32Array), what).toEqual(values);
      dt.dispose([x, y, back]);
    }
  }, 120_000);

  it('draw the same random tensors as one device', async () => {
    const g = new Gen(propertySeed + 13);
    for (let i = 0; i < 20; i++) {
      const mesh = g.pick(meshes);
      const shape = g.shape(1, 3);
      const seed = g.int(0, 1_000_000);
      const placements = g.placements(mesh, shape.length, []);
      const [reference, sharded] = [dt.randn(shape, { seed, mesh: one }), dt.randn(shape, { seed, mesh, placements })];
      expect(await sharded.data(), `randn([${shape}], seed ${seed}) on ${mesh} ${dt.formatPlacements(placements)}`).toEqual(await reference.data());
      dt.dispose([reference, sharded]);
    }
  });

  it('run a tensor-parallel transformer from @dtorch/nn loaded from a PyTorch checkpoint, equal to one device', async () => {
    const file = (name: string) => fileURLToPath(new URL(`../fixtures/nn/${name}`, import.meta.url));
    const io = readSafetensorsHeader(file('io.safetensors'));
    for (const [mesh, input] of [
      [new dt.DeviceMesh('cpu', [1, 2, 3, 4], ['tp']), [dt.Replicate()]],
      [meshes[1]!, [dt.Shard(0), dt.Replicate()]], // dp across the nodes, tp within each
      [meshes[2]!, [dt.Shard(0), dt.Replicate()]], // tp across the nodes
    ] as const) {
      const model = new Transformer(mesh, true);
      const loaded = await model.loadStateDict(file('attention.safetensors'));
      expect(loaded.missingKeys).toEqual([]);
      const ids = fixtureTensor(io, 'attention.in', { mesh, placements: [...input] });
      const y = model.call(ids);
      const [got, want] = [(await y.data()) as Float32Array, (await fixtureTensor(io, 'attention.out', { mesh: one }).data()) as Float32Array];
      expect(y.shape).toEqual([...fixtureTensor(io, 'attention.out', { mesh: one }).shape]);
      let worst = 0;
      got.forEach((v, k) => (worst = Math.max(worst, Math.abs(v - want[k]!) / Math.max(1, Math.abs(want[k]!)))));
      expect(worst, `transformer on ${mesh}`).toBeLessThanOrEqual(1e-5);
      dt.dispose([ids, y]);
      model.dispose();
    }
  }, 120_000);

  it('gives each of two reads in flight on two nodes its own answer: a slow one on node 1, a fast one on node 2', async () => {
    const [slow, fast] = [new dt.DeviceMesh('cpu', [1, 2]), new dt.DeviceMesh('cpu', [3, 4])];
    for (let round = 0; round < 2; round++) {
      // node 1 works for a while (all-gathers and matmuls of ones that stay ones); node 2 answers at once
      const x = dt.ones([512, 512], { mesh: slow, placements: [dt.Shard(0)] });
      let y = x;
      for (let i = 0; i < 40; i++) {
        const next = y.matmul(x.redistribute([dt.Replicate()])).mul(1 / 512);
        if (y !== x) y.dispose();
        y = next;
      }
      const order: string[] = [];
      const slowRead = y.sum().data().then((v) => (order.push('slow'), Number((v as Float32Array)[0])));
      const fastRead = dt.arange(6, { mesh: fast, placements: [dt.Shard(0)] }).mul(3 + round).sum().data().then((v) => (order.push('fast'), Number((v as BigInt64Array)[0])));
      // in flight together; each checked as soon as it is answered (an answer given to the other read would hang the other)
      void fastRead.catch(() => undefined); // awaited below; a failure above must not leave it unhandled
      expect(await within(`round ${round}: the slow read`, 60_000, slowRead, workers), `round ${round}: the slow read`).toBe(512 * 512);
      expect(await within(`round ${round}: the fast read`, 10_000, fastRead, workers), `round ${round}: the fast read`).toBe(15 * (3 + round));
      expect(order, 'the fast read was answered while the slow one waited').toEqual(['fast', 'slow']);
      dt.dispose([x, y]);
    }
  }, 90_000);

  it("runs a tiny Flux transformer's sequence-parallel meshes across the nodes in uneven pieces, equal to one device", async () => {
    const folder = fileURLToPath(new URL('../fixtures/hf/models/flux-dev', import.meta.url));
    const io = readSafetensorsHeader(fileURLToPath(new URL('../fixtures/hf/models/flux-io.safetensors', import.meta.url)));
    // 7 text tokens (and 16 image tokens): the text splits unevenly over 2 and 4 pieces, so the
    // all-to-alls and ring passes move pieces of different sizes between the processes
    const call = async (mesh: dt.DeviceMesh) => {
      const model = await hf.FluxTransformer2DModel.fromPretrained(folder, { mesh, subfolder: 'transformer' });
      const t = (key: string, rows: number, dim: number) => {
        const whole = fixtureTensor(io, `flux-dev.${key}`, { mesh });
        const part = whole.narrow(dim, 0, rows);
        return { whole, part };
      };
      const inputs = [t('hidden_states', 16, 1), t('encoder_hidden_states', 7, 1), t('img_ids', 16, 0), t('txt_ids', 7, 0)];
      const [pooled, timestep, guidance] = ['pooled_projections', 'timestep', 'guidance'].map((k) => fixtureTensor(io, `flux-dev.${k}`, { mesh }));
      const sample = model.call(inputs[0]!.part, { encoderHiddenStates: inputs[1]!.part, imgIds: inputs[2]!.part, txtIds: inputs[3]!.part, pooledProjections: pooled!, timestep: timestep!, guidance: guidance! });
      const values = (await sample.data()) as Float32Array;
      expect(sample.shape).toEqual([2, 16, 16]);
      dt.dispose([sample, pooled!, timestep!, guidance!, ...inputs.flatMap((i) => [i.whole, i.part])]);
      model.dispose();
      return values;
    };
    const want = await call(one);
    for (const mesh of [
      new dt.DeviceMesh('cpu', [1, 3], ['ulysses']), // one all-to-all group over the two workers
      new dt.DeviceMesh('cpu', [0, 4], ['ulysses']), // this process and a worker
      new dt.DeviceMesh('cpu', [1, 3], ['ring']), // key and value blocks passed between the workers
      new dt.DeviceMesh('cpu', [[1, 3], [2, 4]], ['ring', 'ulysses']), // ulysses across the nodes, ring within each
      new dt.DeviceMesh('cpu', [[1, 2], [3, 4]], ['ring', 'ulysses']), // ring across the nodes, ulysses within each
    ]) {
      const got = await call(mesh);
      let worst = 0;
      got.forEach((v, k) => (worst = Math.max(worst, Math.abs(v - want[k]!))));
      expect(worst, `${mesh} ${mesh.dimNames}`).toBeLessThanOrEqual(1e-5);
    }
  }, 120_000);

  it("runs a tiny Flux pipeline's generate with ulysses=2 and ring=2 across the nodes, equal to one device", async () => {
    const call = { prompt: 'a photo of a cat', numInferenceSteps: 2, height: 32, width: 32, seed: 7, outputType: 'latent' as const };
    const alone = await hf.FluxPipeline.tiny({ mesh: one });
    const want = (await alone.generate(call)).images as dt.Tensor;
    const w = (await want.data()) as Float32Array;
    // ulysses: all-to-all between the nodes; ring: the key/value blocks pass by send/recv
    for (const dim of ['ulysses', 'ring']) {
      const spread = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1, 3], [dim]) });
      const got = (await spread.generate(call)).images as dt.Tensor;
      expect(got.shape).toEqual(want.shape);
      let worst = 0;
      ((await got.data()) as Float32Array).forEach((v, k) => (worst = Math.max(worst, Math.abs(v - w[k]!))));
      expect(worst, `${dim}=2`).toBeLessThanOrEqual(1e-5);
      got.dispose();
      spread.dispose();
    }
    want.dispose();
    alone.dispose();
  }, 120_000);

  it('syncs every node, refuses dataSync of a value another node answers, and frees what the program let go of', async () => {
    const mesh = meshes[0]!;
    await settleGarbage(); // tensors earlier tests dropped are released now, not during the count
    const before = dt.memory().numTensors;
    const x = dt.ones([64, 64], { mesh, placements: [dt.Shard(0)] });
    for (let i = 0; i < 20; i++) dt.tidy(() => void x.matmul(x.transpose(0, 1).redistribute([dt.Replicate()])).sum());
    await dt.sync();
    expect(() => x.dataSync()).toThrow(/is read from another node of the cluster.*use await data\(\)/);
    x.dispose();
    expect(dt.memory().numTensors).toBe(before);
  });
});
