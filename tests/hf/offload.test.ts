// Offloading (issue 44, item 5): enableModelCpuOffload keeps each model of a pipeline in host
// memory and on its devices only while it runs; applyGroupOffloading (enableGroupOffload) does the
// same for groups of a model's blocks. The test is the run without it: the same images, bit for
// bit, on one device and on two (tp, ulysses), with the weights off their devices outside their
// phase or group (their tensors disposed, the devices' bytes back where they were), memory flat
// over many calls, and bad options refused with a code, changing nothing.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import type * as nn from '@dtorch/nn';
import { settleGarbage } from '../settle_garbage.js';

const call = { prompt: 'a red circle', height: 32, width: 32, numInferenceSteps: 2, seed: 7, outputType: 'tensor' as const };

// every parameter and buffer of `m`, disposed or not
function tensorsOf(m: nn.Module): dt.Tensor[] {
  return [...m.namedModules()].flatMap(([, owner]) => Object.values(owner).filter((v): v is dt.Tensor => v instanceof dt.Tensor));
}
const isOff = (m: nn.Module) => tensorsOf(m).every((t) => t.isDisposed);
const isOn = (m: nn.Module) => tensorsOf(m).every((t) => !t.isDisposed);

// the bytes of live tensors on each of `devices` (the engine's count, recorded now)
function deviceBytes(devices: readonly string[]): number[] {
  const per = dt.memory().perDevice;
  return devices.map((d) => per.find((p) => p.device === d)?.numBytes ?? 0);
}

async function imagesOf(pipe: hf.DiffusionPipeline, options: object = call): Promise<Float32Array> {
  const { images } = await pipe.generate({ ...call, ...options } as Parameters<hf.FluxPipeline['generate']>[0]);
  const tensor = images as dt.Tensor;
  try {
    return (await tensor.data()) as Float32Array;
  } finally {
    tensor.dispose();
  }
}

describe.each([
  ['1 device (cpu:1)', () => new dt.DeviceMesh('cpu', [1]), ['cpu:1']],
  ['tp=2 (cpu:1,2)', () => new dt.DeviceMesh('cpu', [1, 2], ['tp']), ['cpu:1', 'cpu:2']],
  ['ulysses=2 (cpu:1,2)', () => new dt.DeviceMesh('cpu', [1, 2], ['ulysses']), ['cpu:1', 'cpu:2']],
  // clear of cpu:0 and cpu:1: the sharded weights move within the engine, piece by piece
  ['tp=2 (cpu:2,3)', () => new dt.DeviceMesh('cpu', [2, 3], ['tp']), ['cpu:2', 'cpu:3']],
] as const)('FluxPipeline.enableModelCpuOffload on %s', (_, makeMesh, devices) => {
  let pipe: hf.FluxPipeline;
  let expected: Float32Array;
  let before: number[];
  let hostBefore: number[];

  beforeAll(async () => {
    await dt.sync();
    before = deviceBytes(devices);
    pipe = await hf.FluxPipeline.tiny({ mesh: makeMesh() });
    expected = await imagesOf(pipe);
    await dt.sync();
    hostBefore = deviceBytes(['cpu:0', 'cpu:1']);
    await pipe.enableModelCpuOffload();
  });
  afterAll(() => pipe.dispose());

  it('leaves every model off its devices, and the devices holding none of their bytes', async () => {
    expect(pipe.offloadMode).toBe('model');
    const models = [pipe.textEncoder!, pipe.textEncoder2!, pipe.transformer, pipe.vae];
    for (const m of models) expect(isOff(m)).toBe(true);
    expect(deviceBytes(devices)).toEqual(before);
    // where the host copies lie: a weight whole on every rank on cpu:0, once (every weight of the
    // one-device and ulysses meshes); a sharded one (tp) piece by piece on cpu:0 and cpu:1 (rank
    // 0's and rank 1's), or in JavaScript where its mesh holds those devices itself (cpu:1,2)
    await dt.sync();
    const tensors = models.flatMap((m) => [...new Set(tensorsOf(m))]);
    const whole = tensors.filter((t) => t.placements.every((p) => p.isReplicate()));
    const sharded = tensors.filter((t) => !t.placements.every((p) => p.isReplicate()));
    const meshDevices: readonly string[] = devices;
    const inEngine = !meshDevices.includes('cpu:1');
    const pieceBytes = (rank: number) =>
      inEngine ? sharded.reduce((n, t) => n + (t.nbytes / t.numel) * dt.localPieceOf(t.shape, t.placements, t.mesh, rank).shape.reduce((a, b) => a * b, 1), 0) : 0;
    const host = deviceBytes(['cpu:0', 'cpu:1']);
    expect(host[0]! - hostBefore[0]!).toBe(whole.reduce((n, t) => n + t.nbytes, 0) + pieceBytes(0));
    if (inEngine) expect(host[1]! - hostBefore[1]!).toBe(pieceBytes(1));
    expect(whole.length).toBeGreaterThan(0);
    if (meshDevices.includes('cpu:3')) expect(sharded.length).toBeGreaterThan(0);
  });

  it('gives the same images, bit for bit, with only the model that runs on its devices', async () => {
    const seen: boolean[][] = [];
    const got = await imagesOf(pipe, {
      onStep: () => seen.push([isOn(pipe.transformer), isOff(pipe.textEncoder!), isOff(pipe.textEncoder2!), isOff(pipe.vae)]),
    });
    expect(got).toEqual(expected);
    expect(seen).toEqual([[true, true, true, true], [true, true, true, true]]);
    // the call over, the last model (the VAE) has left too
    for (const m of [pipe.textEncoder!, pipe.textEncoder2!, pipe.transformer, pipe.vae]) expect(isOff(m)).toBe(true);
    expect(deviceBytes(devices)).toEqual(before);
  });

  it('keeps memory flat over many calls', async () => {
    await imagesOf(pipe);
    await dt.sync();
    const first = { tensors: dt.memory().numTensors, bytes: deviceBytes(devices) };
    for (let i = 0; i < 6; i++) await imagesOf(pipe);
    await dt.sync();
    expect({ tensors: dt.memory().numTensors, bytes: deviceBytes(devices) }).toEqual(first);
  });

  it('disableModelCpuOffload puts the models back for good, with the same images', async () => {
    pipe.disableModelCpuOffload();
    expect(pipe.offloadMode).toBeUndefined();
    for (const m of [pipe.textEncoder!, pipe.textEncoder2!, pipe.transformer, pipe.vae]) expect(isOn(m)).toBe(true);
    expect(await imagesOf(pipe)).toEqual(expected);
    for (const m of [pipe.transformer, pipe.vae]) expect(isOn(m)).toBe(true);
    await pipe.enableModelCpuOffload(); // as the other tests left it
  });
});

describe('StableDiffusion3Pipeline.enableModelCpuOffload', () => {
  it('gives the same images, bit for bit, its three text encoders off outside the prompt', async () => {
    const pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1]) });
    try {
      const expected = await imagesOf(pipe);
      await pipe.enableModelCpuOffload();
      const encoders = [pipe.textEncoder!, pipe.textEncoder2!, pipe.textEncoder3!];
      let denoising = 0;
      const got = await imagesOf(pipe, { onStep: () => void (denoising += Number(encoders.every(isOff) && isOn(pipe.transformer) && isOff(pipe.vae))) });
      expect(got).toEqual(expected);
      expect(denoising).toBe(2);
      expect([...encoders, pipe.transformer, pipe.vae].every(isOff)).toBe(true);
    } finally {
      pipe.dispose();
    }
  });

  it('runs an image-to-image variant, its VAE on for the encoding and again for the decoding', async () => {
    const pipe = await hf.StableDiffusion3Img2ImgPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1]) });
    try {
      const image = dt.tidy(() => dt.rand([1, 3, 32, 32], { seed: 3 }));
      const options = { image, strength: 0.6, numInferenceSteps: 3 };
      const expected = await imagesOf(pipe, options);
      await pipe.enableModelCpuOffload();
      expect(await imagesOf(pipe, options)).toEqual(expected);
      expect([pipe.transformer, pipe.vae].every(isOff)).toBe(true);
      image.dispose();
    } finally {
      pipe.dispose();
    }
  });
});

describe('offloading an FP8 transformer', () => {
  // whether each single block ran q/k/v and proj_mlp as one FP8 matmul when it was called (after
  // the offloading's own hooks brought it on)
  const packedWhenCalled = (pipe: hf.FluxPipeline) => {
    const seen: boolean[] = [];
    const hooks = [...pipe.transformer.single_transformer_blocks].map((b) =>
      b.registerForwardPreHook(() => void seen.push((b as hf.FluxSingleTransformerBlock).packsFp8Inputs)),
    );
    return { seen, remove: () => hooks.forEach((h) => h.remove()) };
  };

  it.each(['model', 'group'] as const)('%s offload brings the float8 weights and their scales back exactly, packed as loading packed them: the same images', async (kind) => {
    const pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1]), quantize: 'fp8' });
    try {
      expect(tensorsOf(pipe.transformer).some((t) => t.dtype === 'float8_e4m3fn')).toBe(true);
      const expected = await imagesOf(pipe);
      if (kind === 'model') await pipe.enableModelCpuOffload();
      else await pipe.enableGroupOffload({ numBlocksPerGroup: 1 });
      const packed = packedWhenCalled(pipe);
      expect(await imagesOf(pipe)).toEqual(expected);
      packed.remove();
      expect(packed.seen.length).toBeGreaterThan(0);
      expect(packed.seen.every((p) => p)).toBe(true);
      expect(isOff(pipe.transformer.single_transformer_blocks.at(0))).toBe(true);
    } finally {
      pipe.dispose();
    }
  });
});

describe('applyGroupOffloading', () => {
  let pipe: hf.FluxPipeline;
  let expected: Float32Array;
  const mesh = new dt.DeviceMesh('cpu', [1, 2], ['tp']);

  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny({ mesh });
    expected = await imagesOf(pipe);
  });
  afterAll(() => pipe.dispose());

  it.each([
    [1, true],
    [1, false],
    [2, true],
  ])('numBlocksPerGroup %i, useStream %s: the same images, only the group that runs (and the next one) on the devices', async (numBlocksPerGroup, useStream) => {
    const transformer = pipe.transformer;
    const blocks = [...transformer.transformer_blocks, ...transformer.single_transformer_blocks];
    // before the offloading's own hooks: whether a block is on its devices already when it is called
    const onBefore: boolean[] = [];
    const early = blocks.map((block) => block.registerForwardPreHook(() => void onBefore.push(isOn(block))));
    const handle = await hf.applyGroupOffloading(transformer, { numBlocksPerGroup, useStream });
    try {
      expect(handle.groups.flat()).toEqual([
        ...[...transformer.transformer_blocks].map((_, i) => `transformer_blocks.${i}`),
        ...[...transformer.single_transformer_blocks].map((_, i) => `single_transformer_blocks.${i}`),
      ]);
      expect(handle.groups.every((g) => g.length <= numBlocksPerGroup)).toBe(true);
      expect(blocks.every(isOff)).toBe(true);
      expect(isOn(transformer.x_embedder)).toBe(true); // the rest of the model stays
      // while a block runs: its group on, every other group off
      const onWhileRunning: number[] = [];
      const probes = blocks.map((block) =>
        block.registerForwardPreHook(() => {
          onWhileRunning.push(handle.onDevice.filter(Boolean).length);
          expect(isOn(block)).toBe(true);
        }),
      );
      try {
        expect(await imagesOf(pipe)).toEqual(expected);
      } finally {
        for (const p of [...probes, ...early]) p.remove();
      }
      expect(new Set(onWhileRunning)).toEqual(new Set([1]));
      // a group's first block found on already: the group was prefetched (all but each list's first group, every step)
      const firstOfGroup = handle.groups.map((g) => handle.groups.flat().indexOf(g[0]!));
      const listStarts = [0, transformer.transformer_blocks.length];
      const prefetched = onBefore.filter((on, call) => on && firstOfGroup.includes(call % blocks.length) && !listStarts.includes(call % blocks.length)).length;
      const steps = onBefore.length / blocks.length;
      expect(prefetched).toBe(useStream ? steps * (handle.groups.length - 2) : 0);
      expect(handle.onDevice.every((on) => !on)).toBe(true);
      expect(blocks.every(isOff)).toBe(true);
      expect(handle.hostBytes).toBeGreaterThan(0);
    } finally {
      handle.remove();
    }
    expect([...transformer.transformer_blocks].every(isOn)).toBe(true);
    expect(await imagesOf(pipe)).toEqual(expected);
  });

  it('keeps bfloat16 blocks as bfloat16 in host memory, on a pipeline in bfloat16: the same images', async () => {
    const bf16 = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1]), dtype: 'bfloat16' });
    try {
      const want = await imagesOf(bf16);
      const handle = await hf.applyGroupOffloading(bf16.transformer, { numBlocksPerGroup: 3 });
      const blocks = [...bf16.transformer.transformer_blocks, ...bf16.transformer.single_transformer_blocks];
      expect(handle.hostBytes).toBe(blocks.flatMap(tensorsOf).reduce((n, t) => n + t.nbytes, 0));
      expect(blocks.flatMap(tensorsOf).every((t) => t.dtype === 'bfloat16')).toBe(true);
      expect(await imagesOf(bf16)).toEqual(want);
      handle.remove();
    } finally {
      bf16.dispose();
    }
  });

  it("offloads T5's blocks too, with the same prompt embeddings", async () => {
    const t5 = pipe.textEncoder2!;
    const ids = [[5, 9, 2, 1, 0, 0]];
    const hidden = async () => {
      const out = t5.forward(ids).lastHiddenState;
      try {
        return await out.data();
      } finally {
        out.dispose();
      }
    };
    const want = await hidden();
    const handle = await hf.applyGroupOffloading(t5, { numBlocksPerGroup: 1 });
    try {
      expect(handle.groups.flat().every((p) => p.startsWith('encoder.block.'))).toBe(true);
      expect(await hidden()).toEqual(want);
      expect(handle.onDevice.some(Boolean)).toBe(false);
    } finally {
      handle.remove();
    }
  });

  it('keeps memory flat over many calls', async () => {
    await pipe.enableGroupOffload({ numBlocksPerGroup: 1 });
    try {
      expect(pipe.offloadMode).toBe('group');
      await imagesOf(pipe);
      await dt.sync();
      const first = { tensors: dt.memory().numTensors, bytes: deviceBytes(['cpu:1', 'cpu:2']) };
      for (let i = 0; i < 6; i++) await imagesOf(pipe);
      await dt.sync();
      expect({ tensors: dt.memory().numTensors, bytes: deviceBytes(['cpu:1', 'cpu:2']) }).toEqual(first);
      expect(await imagesOf(pipe)).toEqual(expected);
    } finally {
      pipe.disableGroupOffload();
    }
    expect(pipe.offloadMode).toBeUndefined();
  });
});

describe('StableDiffusion3Pipeline.enableGroupOffload', () => {
  it('gives the same images, bit for bit, with its transformer and text encoders in groups', async () => {
    const pipe = await hf.StableDiffusion3Pipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1, 2], ['ulysses']) });
    try {
      const expected = await imagesOf(pipe);
      await pipe.enableGroupOffload({ numBlocksPerGroup: 1 });
      expect(await imagesOf(pipe)).toEqual(expected);
      expect([...pipe.transformer.transformer_blocks].every(isOff)).toBe(true);
      expect(isOn(pipe.vae)).toBe(true);
      pipe.disableGroupOffload();
      expect([...pipe.transformer.transformer_blocks].every(isOn)).toBe(true);
      expect(await imagesOf(pipe)).toEqual(expected);
    } finally {
      pipe.dispose();
    }
  });
});

describe('offloading a pipeline with LoRA adapters', () => {
  const style = fileURLToPath(new URL('../fixtures/hf/lora/flux-style.safetensors', import.meta.url));
  const detail = fileURLToPath(new URL('../fixtures/hf/lora/flux-detail.safetensors', import.meta.url));

  it.each([
    ['model', false],
    ['model', true],
    ['group', false],
  ] as const)('%s offloading, fused %s: the same images as the resident pipeline with the same adapters', async (kind, fuse) => {
    const pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1]) });
    try {
      await pipe.loadLoraWeights(style, { adapterName: 'style' });
      await pipe.loadLoraWeights(detail, { adapterName: 'detail' });
      pipe.setAdapters(['style', 'detail'], [0.8, 0.5]);
      if (fuse) pipe.fuseLora();
      const expected = await imagesOf(pipe);
      await dt.sync();
      await settleGarbage(); // what earlier tests left to the collector goes now, not between the counts below
      const resident = deviceBytes(['cpu:1'])[0]!;
      await (kind === 'model' ? pipe.enableModelCpuOffload() : pipe.enableGroupOffload());
      const offloaded = deviceBytes(['cpu:1'])[0]!;
      expect(await imagesOf(pipe)).toEqual(expected);
      expect(deviceBytes(['cpu:1'])[0]).toBe(offloaded); // the call over, what it moved on has gone again
      // fused (no layout beside the adapters), model offload frees every weight: the adapters stay
      if (kind === 'model' && fuse) {
        const weights = [pipe.textEncoder!, pipe.textEncoder2!, pipe.transformer, pipe.vae].reduce((n, m) => n + tensorsOf(m).reduce((k, t) => k + t.nbytes, 0), 0);
        expect(resident - offloaded).toBe(weights);
      }
      await expect(imagesOf(pipe, { loraScale: 0.5 })).rejects.toThrow(
        `FluxPipeline.generate: loraScale does not run with ${kind} offloading on; set the adapters' weights with setAdapters() before enabling it`,
      );
      expect(await imagesOf(pipe)).toEqual(expected); // the refused call changed nothing
      const ones = await (async () => {
        pipe.setAdapters(['style', 'detail'], [0.8, 0.5]);
        return null;
      })().catch((e: unknown) => e);
      expect((ones as dt.DTorchError).code).toBe(dt.ErrorCode.InvalidArgument); // LoRA changes wait until it is off
      if (kind === 'model') pipe.disableModelCpuOffload();
      else pipe.disableGroupOffload();
      expect(await imagesOf(pipe)).toEqual(expected);
    } finally {
      pipe.dispose();
    }
  });
});

describe('bad offloading options', () => {
  let pipe: hf.FluxPipeline;
  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [1]) });
  });
  afterAll(() => pipe.dispose());

  const refused = async (run: () => unknown, code: string, message: string | RegExp) => {
    let err: unknown;
    try {
      await run();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(dt.DTorchError);
    expect((err as dt.DTorchError).code).toBe(code);
    expect((err as Error).message).toMatch(message);
    // nothing moved
    expect(isOn(pipe.transformer) && isOn(pipe.textEncoder2!)).toBe(true);
    expect(pipe.offloadMode).toBeUndefined();
    expect(hf.groupOffloadingOf(pipe.transformer)).toBeUndefined();
  };

  it('refuses numBlocksPerGroup that is not a positive integer, unknown options, and a module without blocks', async () => {
    await refused(() => hf.applyGroupOffloading(pipe.transformer, { numBlocksPerGroup: 0 }), dt.ErrorCode.InvalidArgument, /numBlocksPerGroup/);
    await refused(() => hf.applyGroupOffloading(pipe.transformer, { numBlocksPerGroup: 1.5 }), dt.ErrorCode.InvalidArgument, /numBlocksPerGroup/);
    await refused(() => hf.applyGroupOffloading(pipe.transformer, { useStream: 'yes' as never }), dt.ErrorCode.InvalidArgument, /useStream/);
    await refused(() => hf.applyGroupOffloading(pipe.transformer, { blocks: 2 } as never), dt.ErrorCode.InvalidArgument, /blocks/);
    await refused(() => hf.applyGroupOffloading(pipe.transformer.x_embedder), dt.ErrorCode.InvalidArgument, 'applyGroupOffloading: Linear has no repeated blocks (no ModuleList of modules) to offload');
    await refused(() => hf.applyGroupOffloading({} as never), dt.ErrorCode.InvalidArgument, /module/);
    await refused(() => pipe.enableGroupOffload({ numBlocksPerGroup: -1 }), dt.ErrorCode.InvalidArgument, /numBlocksPerGroup/);
  });

  it('refuses one kind while the other is on, a second group offloading, and LoRA changes while offloaded', async () => {
    await pipe.enableModelCpuOffload();
    try {
      await expect(pipe.enableGroupOffload()).rejects.toThrow('FluxPipeline.enableGroupOffload: model offloading is on; disableModelCpuOffload() first (one kind at a time)');
      expect(() => pipe.disableGroupOffload()).toThrow(/model offloading is on/);
      expect(() => pipe.setAdapters('x')).toThrow('FluxPipeline.setAdapters: model offloading is on (the weights are in host memory); change LoRA adapters before enabling it, or disableModelCpuOffload() first');
    } finally {
      pipe.disableModelCpuOffload();
    }
    await pipe.enableModelCpuOffload();
    try {
      await expect(hf.applyGroupOffloading(pipe.transformer)).rejects.toThrow('applyGroupOffloading: FluxTransformer2DModel is under model offloading; disable it first (one kind at a time)');
    } finally {
      pipe.disableModelCpuOffload();
    }
    const handle = await hf.applyGroupOffloading(pipe.transformer);
    try {
      await expect(hf.applyGroupOffloading(pipe.transformer)).rejects.toThrow('applyGroupOffloading: FluxTransformer2DModel has group offloading already; remove() it first');
      await expect(pipe.enableModelCpuOffload()).rejects.toThrow('FluxPipeline.enableModelCpuOffload: the transformer is under group offloading already; remove it first (one kind at a time)');
      expect(pipe.offloadMode).toBeUndefined();
      expect(isOn(pipe.textEncoder2!) && isOn(pipe.vae)).toBe(true); // the refused call moved nothing
    } finally {
      handle.remove();
    }
  });

  it('refuses enabling while a generate() call runs, and generate() while enabling', async () => {
    const running = pipe.generate({ ...call, numInferenceSteps: 1 });
    await expect(pipe.enableModelCpuOffload()).rejects.toThrow(/generate\(\) call\(s\) are waiting or running/);
    ((await running).images as dt.Tensor).dispose();
    const enabling = pipe.enableModelCpuOffload();
    await expect(pipe.generate(call)).rejects.toThrow(/offloading is being enabled/);
    await enabling;
    pipe.disableModelCpuOffload();
  });
});

// On a GPU the weights come through pinned host memory (the engine's toDevice): the same images,
// with CUDA graphs replaying over weights brought back to other addresses, and the weights off the
// GPU again once a call ends. Skipped without CUDA.
describe.skipIf(!dt.cuda.isAvailable())('offloading on cuda:0', () => {
  const allocated = () => dt.cuda.memoryStats(0).allocatedBytes;
  const liveOnGpu = () => dt.memory().perDevice.find((d) => d.device === 'cuda:0')?.numBytes ?? 0; // the engine's tensors there

  it.each(['model', 'group:2'] as const)('%s: the same images, bit for bit, and the weights off the GPU after the call', async (kind) => {
    const pipe = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cuda', [0]), dtype: 'bfloat16' });
    const graphs = dt.graph.enabled();
    try {
      const expected = await imagesOf(pipe);
      await dt.sync();
      const [resident, residentLive] = [allocated(), liveOnGpu()];
      await (kind === 'model' ? pipe.enableModelCpuOffload() : pipe.enableGroupOffload({ numBlocksPerGroup: 2 }));
      await dt.sync();
      const offloadedLive = liveOnGpu();
      expect(allocated()).toBeLessThan(resident);
      expect(offloadedLive).toBeLessThan(residentLive);
      // twice: the second call replays the graphs the first captured, over the weights brought back anew
      for (let call = 0; call < 2; call++) {
        expect(await imagesOf(pipe)).toEqual(expected);
        await dt.sync();
        expect(liveOnGpu()).toBe(offloadedLive); // the weights went off again (model: nothing left on the GPU)
      }
      // the allocator too: a call leaves nothing behind. Graphs off for this one, as the graphs
      // captured above keep their pools for the spans that read no weight (their next replay's
      // memory; a graph that read a weight was dropped with it) and a new capture would add one.
      dt.graph.setEnabled(false);
      const before = allocated();
      expect(await imagesOf(pipe)).toEqual(expected);
      await dt.sync();
      expect(allocated()).toBeLessThanOrEqual(before);
    } finally {
      dt.graph.setEnabled(graphs);
      pipe.dispose();
    }
  });
});
