// FluxTransformer2DModel loaded with fromPretrained from folders that diffusers' save_pretrained
// wrote (tools/reference/make_flux_fixtures.py: tiny FLUX.1-dev and -schnell layouts) gives
// diffusers' sample: float32 within 1e-4 of the largest reference value (max |got - want| /
// max |want|) on one CPU device, and the same model code on sequence-parallel meshes ('ulysses'
// 2, 'ring' 2, 2x2 ring x ulysses: image and text tokens split, the joint sequence joined piece
// by piece), on 'dp' 2 (the batch split), on 'tp' 2 (heads and MLP features split, fluxTpPlan),
// on 2x2 dp x ulysses, dp x tp and tp x ulysses, and on CUDA where present (an H200: 8.2e-6).
// Token counts the pieces do not divide (7 text tokens over 2) equal one device; where the
// pieces do not join (5 over 4 ring pieces) the call is refused.
// Loaded as bfloat16, within 1e-2 of diffusers in bfloat16 on CPUs (4.1e-3 here); on GPUs within
// 2e-2 (6.1e-3, then 1.02e-2 on the H200 once q, k and v reach attention token-major: the GPU's
// attention and GEMM kernels round in their own order, and the fixture is a CPU run's).
// Bad input is a DTorchError at the call.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const folder = (name: string) => fileURLToPath(new URL(`../fixtures/hf/models/${name}`, import.meta.url));
const io = readSafetensorsHeader(folder('flux-io.safetensors'));

const models = [
  { name: 'flux-dev', guidance: true },
  { name: 'flux-schnell', guidance: false },
];

interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  skip: string | false;
}

const meshes: MeshCase[] = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), skip: false },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']), skip: false },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']), skip: false },
  { name: 'ring=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['ring', 'ulysses']), skip: false },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']), skip: false },
  { name: 'dp=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ulysses']), skip: false },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), skip: false },
  { name: 'dp=2 x tp=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']), skip: false },
  { name: 'tp=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['tp', 'ulysses']), skip: false },
  { name: `cuda x1${skipNote(cudaSkip(1))}`, make: () => cudaMesh(1), skip: cudaSkip(1) },
  { name: `cuda ulysses=2${skipNote(cudaSkip(2))}`, make: () => cudaMesh(2, ['ulysses']), skip: cudaSkip(2) },
];
const cudaMeshes = meshes.filter((m) => m.name.startsWith('cuda'));

function inputs(name: string, guidance: boolean, mesh: dt.DeviceMesh) {
  const t = (key: string) => fixtureTensor(io, `${name}.${key}`, { mesh });
  return {
    hidden: t('hidden_states'),
    options: {
      encoderHiddenStates: t('encoder_hidden_states'),
      pooledProjections: t('pooled_projections'),
      timestep: t('timestep'),
      ...(guidance ? { guidance: t('guidance') } : {}),
      imgIds: t('img_ids'),
      txtIds: t('txt_ids'),
    } as hf.FluxTransformerCallOptions,
  };
}

describe('FluxTransformer2DConfig', () => {
  it("has diffusers' defaults (FLUX.1's sizes)", () => {
    const c = hf.FluxTransformer2DConfig.fromDict({});
    expect([c.patchSize, c.inChannels, c.outChannels, c.numLayers, c.numSingleLayers, c.attentionHeadDim, c.numAttentionHeads]).toEqual([1, 64, 64, 19, 38, 128, 24]);
    expect([c.jointAttentionDim, c.pooledProjectionDim, c.guidanceEmbeds, c.axesDimsRope, c.innerDim]).toEqual([4096, 768, false, [16, 56, 56], 3072]);
    expect(hf.FluxTransformer2DConfig.fromDict({ in_channels: 16, out_channels: null }).outChannels).toBe(16);
    expect(hf.FluxTransformer2DConfig.fromDict({ out_channels: 8 }).outChannels).toBe(8);
  });

  it('reads the fixture and keeps the keys it does not read', () => {
    const c = hf.FluxTransformer2DConfig.fromFile(`${folder('flux-dev')}/transformer/config.json`);
    expect([c.guidanceEmbeds, c.axesDimsRope, c.innerDim, c.numLayers, c.numSingleLayers]).toEqual([true, [4, 6, 6], 32, 1, 1]);
    expect(Object.keys(c.extra)).toContain('_class_name');
  });

  it('refuses bad values with BAD_CONFIG naming the key', () => {
    const bad = (values: hf.JsonObject) => () => hf.FluxTransformer2DConfig.fromDict(values);
    expect(bad({ axes_dims_rope: [16, 56, 50] })).toThrow(/"axes_dims_rope" must be even dims adding up to attention_head_dim \(128\)/);
    expect(bad({ axes_dims_rope: [3, 61, 64] })).toThrow(/"axes_dims_rope" must be a non-empty array of positive even integers/);
    expect(bad({ guidance_embeds: 'yes' })).toThrow(/"guidance_embeds" must be a boolean/);
    expect(bad({ num_attention_heads: 0 })).toThrow(/"num_attention_heads" must be a positive integer/);
    expect(bad({ num_layers: 1.5 })).toThrow(dt.DTorchError);
  });
});

describe('FluxTransformer2DModel for the released configs', () => {
  // FLUX.1-dev's and -schnell's configs give diffusers' state-dict keys and shapes, key for key
  // (built without values: nothing is allocated)
  const released = JSON.parse(readFileSync(folder('flux_state_dict_shapes.json'), 'utf8')) as { config: hf.JsonObject; keys: Record<string, number[]>; schnell_lacks: string[] };
  it.each([
    { name: 'FLUX.1-dev', guidance: true },
    { name: 'FLUX.1-schnell', guidance: false },
  ])('$name has the keys and shapes of diffusers', ({ guidance }) => {
    const config = hf.FluxTransformer2DConfig.fromDict({ ...released.config, guidance_embeds: guidance });
    const model = hf.nn.skipInit(() => new hf.FluxTransformer2DModel(config, { mesh: new dt.DeviceMesh('cpu', [0]) }));
    const ours = Object.fromEntries([...model.namedParameters(), ...model.namedBuffers()].map(([k, t]) => [k, [...t.shape]]));
    const want = Object.fromEntries(Object.entries(released.keys).filter(([k]) => guidance || !released.schnell_lacks.includes(k)));
    expect(ours).toEqual(want);
    model.dispose();
  });
});

describe.each(meshes)('FluxTransformer2DModel on $name matches diffusers', ({ make, skip }) => {
  it.skipIf(skip).each(models)('$name', async ({ name, guidance }) => {
    const before = dt.memory().numTensors;
    const mesh = make();
    const model = await hf.FluxTransformer2DModel.fromPretrained(folder(name), { mesh, subfolder: 'transformer' });
    expect(model.config.guidanceEmbeds).toBe(guidance);
    expect('guidance_embedder' in model.time_text_embed).toBe(guidance);
    if (mesh.dimNames?.includes('tp')) {
      const q = model.transformer_blocks.at(0).attn.to_q;
      expect(q.weight.placements.map(String), 'q is split by heads over tp').toContain('S(0)');
    }
    // the tokens stay split through every block: the last single block's attention sees its share
    const seen: string[][] = [];
    const attn = model.single_transformer_blocks.at(-1).attn;
    const forward = attn.forward.bind(attn);
    attn.forward = (x: dt.Tensor, encoder: dt.Tensor | undefined, rotary: hf.RotaryTables) => (seen.push(x.placements.map(String)), forward(x, encoder, rotary));
    const { hidden, options } = inputs(name, guidance, mesh);
    const sample = model.call(hidden, options);
    const sequenceDims = (mesh.dimNames ?? []).flatMap((n, d) => (n === 'ulysses' || n === 'ring' ? [d] : []));
    for (const d of sequenceDims) expect(seen[0]![d], 'joint tokens split on the sequence-parallel dims').toBe('S(1)');
    await expectClose(sample, fixtureTensor(io, `${name}.sample`, { mesh }), 1e-4, `${name} on ${mesh}`);
    for (const x of [sample, hidden, ...Object.values(options)]) (x as dt.Tensor).dispose();
    model.dispose();
    await dt.sync();
    expect(dt.memory().numTensors, 'no tensors left behind').toBe(before);
  });
});

describe('FluxTransformer2DModel rotary tables', () => {
  // a denoising loop passes the same ids every step: their tables are made on the first call only
  it('makes the tables of the ids once for calls with the same ids, and anew for other ids', async () => {
    const before = dt.memory().numTensors;
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const load = () => hf.FluxTransformer2DModel.fromPretrained(folder('flux-dev'), { mesh, subfolder: 'transformer' });
    const model = await load();
    const { hidden, options } = inputs('flux-dev', true, mesh);
    const recorded = async (f: () => dt.Tensor): Promise<[dt.Tensor, number]> => {
      await dt.sync();
      const start = dt.graph.stats().nodes;
      const out = f();
      await dt.sync();
      return [out, dt.graph.stats().nodes - start];
    };
    const [first, firstNodes] = await recorded(() => model.call(hidden, options));
    const [second, secondNodes] = await recorded(() => model.call(hidden, options));
    expect(firstNodes - secondNodes, 'the tables\' ops, recorded once').toBeGreaterThan(40);
    const bytes = async (t: dt.Tensor) => Buffer.from(((await t.data()) as Float32Array).buffer);
    expect((await bytes(second)).equals(await bytes(first))).toBe(true);
    await expectClose(second, fixtureTensor(io, 'flux-dev.sample', { mesh }), 1e-4, 'the second call');
    // other ids get their own tables: bit for bit those of a model that never saw the first ids
    const shifted = { ...options, imgIds: options.imgIds!.add(3) };
    const [third] = await recorded(() => model.call(hidden, shifted));
    const fresh = await load();
    const reference = fresh.call(hidden, shifted);
    expect((await bytes(third)).equals(await bytes(first)), 'the ids change the sample').toBe(false);
    expect((await bytes(third)).equals(await bytes(reference))).toBe(true);
    // and the first ids again (as classifier-free guidance alternates two): still kept
    const [fourth, fourthNodes] = await recorded(() => model.call(hidden, options));
    expect(fourthNodes).toBe(secondNodes);
    expect((await bytes(fourth)).equals(await bytes(first))).toBe(true);
    model.releaseCallCache();
    const [fifth, afterRelease] = await recorded(() => model.call(hidden, options));
    expect(afterRelease, 'made again after releaseCallCache').toBe(firstNodes);
    dt.dispose([first, second, third, fourth, fifth, reference, hidden, shifted.imgIds, ...Object.values(options)] as dt.Tensor[]);
    model.dispose();
    fresh.dispose();
    await dt.sync();
    expect(dt.memory().numTensors, 'the tables go with the model').toBe(before);
  });
});

describe.each([meshes[0]!, meshes[1]!, ...cudaMeshes])('FluxTransformer2DModel in bfloat16 on $name', ({ make, skip }) => {
  // loaded as bfloat16 from the float32 checkpoint, inputs (but the ids) in bfloat16, as diffusers
  // run in bfloat16 (rotary tables float32, attention inputs rotated in float32 and cast back)
  it.skipIf(skip).each(models)('$name close to diffusers in bfloat16', async ({ name, guidance }) => {
    const mesh = make();
    const tolerance = mesh.deviceType === 'cuda' ? 2e-2 : 1e-2;
    const model = await hf.FluxTransformer2DModel.fromPretrained(folder(name), { mesh, subfolder: 'transformer', dtype: 'bfloat16' });
    expect(model.x_embedder.weight.dtype).toBe('bfloat16');
    const { hidden, options } = inputs(name, guidance, mesh);
    const b = (t: dt.Tensor | number | undefined) => (t as dt.Tensor | undefined)?.to('bfloat16');
    const bf16Options = { ...options, encoderHiddenStates: b(options.encoderHiddenStates)!, pooledProjections: b(options.pooledProjections)!, timestep: b(options.timestep)!, guidance: b(options.guidance) };
    if (!guidance) delete bf16Options.guidance;
    const sample = model.call(b(hidden)!, bf16Options);
    expect(sample.dtype).toBe('bfloat16');
    await expectClose(sample, fixtureTensor(io, `${name}.bf16.sample`, { mesh }), tolerance, `${name} bf16 on ${mesh}`);
    dt.dispose([sample, hidden, options, bf16Options] as unknown as dt.Tensor[]);
    model.dispose();
  });
});

describe('joinSequence on sequence-parallel meshes', () => {
  it.each(meshes.slice(1, 4))('$name: the joint sequence stays split, piece r = text piece r then image piece r', async ({ make }) => {
    const mesh = make();
    const split = mesh.shape.map(() => dt.Shard(1));
    const text = dt.arange(0, 8, 1, { dtype: 'float32', mesh }).reshape([1, 8, 1]).redistribute(split);
    const image = dt.arange(100, 116, 1, { dtype: 'float32', mesh }).reshape([1, 16, 1]).redistribute(split);
    const joint = hf.joinSequence([text, image], 1);
    expect(joint.placements.map(String)).toEqual(split.map(String));
    const pieces = mesh.size;
    const local = await joint.toLocal(pieces - 1).data();
    const [t, i] = [8 / pieces, 16 / pieces];
    expect([...local]).toEqual([...Array.from({ length: t }, (_, k) => 8 - t + k), ...Array.from({ length: i }, (_, k) => 116 - i + k)]);
    const [textBack, imageBack] = hf.splitSequence(joint, [8, 16], 1) as [dt.Tensor, dt.Tensor];
    expect([...(await textBack.data())]).toEqual([...(await text.data())]);
    expect([...(await imageBack.data())]).toEqual([...(await image.data())]);
    expect(imageBack.placements.map(String)).toEqual(split.map(String));
    dt.dispose([text, image, joint, textBack, imageBack]);
  });
});

describe('FluxTransformer2DModel with token counts the sequence pieces do not divide', () => {
  // 7 text tokens (4 + 3 over 2 pieces) with 16 image tokens (8 + 8) join piece by piece into
  // 23's torch.chunk pieces (12, 11): equal to one device. Over 4 ring pieces 5 text tokens are
  // 2, 2, 1, 0, which with 4 image tokens a piece do not make 21's (6, 6, 6, 3): refused.
  const narrowed = (x: ReturnType<typeof inputs>, n: number) => ({
    ...x.options,
    encoderHiddenStates: x.options.encoderHiddenStates.narrow(1, 0, n),
    txtIds: x.options.txtIds.narrow(0, 0, n),
  });
  it.each(meshes.slice(1, 4))('$name: 7 text tokens equal one device', async ({ make }) => {
    const [mesh, one] = [make(), new dt.DeviceMesh('cpu', [0])];
    const [model, reference] = [
      await hf.FluxTransformer2DModel.fromPretrained(folder('flux-schnell'), { mesh, subfolder: 'transformer' }),
      await hf.FluxTransformer2DModel.fromPretrained(folder('flux-schnell'), { mesh: one, subfolder: 'transformer' }),
    ];
    const [x, y] = [inputs('flux-schnell', false, mesh), inputs('flux-schnell', false, one)];
    const [xo, yo] = [narrowed(x, 7), narrowed(y, 7)];
    const got = model.call(x.hidden, xo);
    const want = reference.call(y.hidden, yo);
    await expectClose(got, want, 1e-5, `7 text tokens on ${mesh}`);
    dt.dispose([got, x.hidden, y.hidden, ...Object.values(x.options), ...Object.values(y.options), xo.encoderHiddenStates, xo.txtIds, yo.encoderHiddenStates, yo.txtIds] as dt.Tensor[]);
    model.dispose();
    reference.dispose();
  });

  it('ring=4: 5 text tokens are refused at the call, naming the sizes', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['ring']);
    const model = await hf.FluxTransformer2DModel.fromPretrained(folder('flux-schnell'), { mesh, subfolder: 'transformer' });
    const x = inputs('flux-schnell', false, mesh);
    const xo = narrowed(x, 5);
    const before = dt.memory().numTensors;
    let thrown: unknown;
    try {
      model.call(x.hidden, xo);
    } catch (err) {
      thrown = err;
    }
    expect(dt.isDTorchError(thrown), String(thrown)).toBe(true);
    expect((thrown as dt.DTorchError).code).toBe('SHAPE_MISMATCH');
    expect((thrown as Error).message).toMatch(/join_shards: parts of lengths \[5, 16\] along dim 0, each in 4 pieces .*rank 2 holds 1 \+ 4 = 5 but torch.chunk gives it 6/);
    expect(dt.memory().numTensors, 'nothing left behind').toBe(before);
    dt.dispose([x.hidden, ...Object.values(x.options), xo.encoderHiddenStates, xo.txtIds] as dt.Tensor[]);
    model.dispose();
  });
});

describe('FluxTransformer2DModel bad input', () => {
  it('is a DTorchError at the call', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const dev = await hf.FluxTransformer2DModel.fromPretrained(folder('flux-dev'), { mesh, subfolder: 'transformer' });
    const schnell = await hf.FluxTransformer2DModel.fromPretrained(folder('flux-schnell'), { mesh, subfolder: 'transformer' });
    const { hidden, options } = inputs('flux-dev', true, mesh);
    const { guidance, ...noGuidance } = options;
    const bad = (model: hf.FluxTransformer2DModel, x: dt.Tensor, o: object) => () => model.call(x, o as hf.FluxTransformerCallOptions);
    expect(bad(dev, hidden, noGuidance)).toThrow(/has guidance embeddings.*pass \{ guidance \}/);
    expect(bad(schnell, hidden, options)).toThrow(/has no guidance embeddings/);
    expect(bad(dev, hidden.narrow(2, 0, 8), options)).toThrow(/hiddenStates must be \[batch, imageLength, 16\], got/);
    expect(bad(dev, hidden, { ...options, encoderHiddenStates: options.encoderHiddenStates.narrow(0, 0, 1) })).toThrow(/encoderHiddenStates must be \[2, textLength, 32\]/);
    expect(bad(dev, hidden, { ...options, txtIds: options.imgIds })).toThrow(/txtIds must be \[8, 3\]/);
    expect(bad(dev, hidden, { ...options, timestep: 'soon' })).toThrow(/timestep/);
    expect(bad(dev, hidden, { ...options, pooledProjections: undefined })).toThrow(/pooledProjections/);
    const other = new dt.DeviceMesh('cpu', [1]);
    const elsewhere = dt.zeros([2, 16, 16], { mesh: other });
    expect(bad(dev, elsewhere, options)).toThrow(/is on .* but the model on/);
    expect(bad(dev, hidden, noGuidance)).toThrow(dt.DTorchError);
    // diffusers' deprecated [1, length, axes] ids give the same sample
    const [plain, batched] = dt.tidy(() => [dev.call(hidden, options), dev.call(hidden, { ...options, imgIds: options.imgIds.unsqueeze(0), txtIds: options.txtIds.unsqueeze(0) })]);
    expect([...(await batched.data())]).toEqual([...(await plain.data())]);
    dt.dispose([plain, batched]);
    dt.dispose([hidden, elsewhere, guidance as dt.Tensor, ...Object.values(noGuidance)] as dt.Tensor[]);
    for (const m of [dev, schnell]) m.dispose();
  });
});
