// fromSingleFile (diffusers' from_single_file) on single-file checkpoints in the original layouts
// that tools/reference/make_single_file_fixtures.py wrote from tiny diffusers models (and checked
// diffusers reads back to the same weights): tiny-flux in BFL's layout, tiny-sd3 in SD3's with
// the "model.diffusion_model." prefix, an SD3.5-style MMDiT (qk norms, dual attention). Each
// gives diffusers' output (float32, within 1e-4 of the largest value) on one CPU device and on
// tp=2 (q/k/v split by rows of the fused qkv per rank); the config inferred from the shapes
// equals the diffusers config, with options.config giving what the shapes do not fix. A Flux
// file with the prefix and other components' tensors beside it loads the same. Bad files (not
// safetensors, keys of no known layout, another model's layout, a missing tensor, a truncated
// file, shapes or options.config that disagree) are DTorchErrors saying what to do, and a failure
// after the model was built leaves no tensors behind.
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader, readTensorBytes, writeSafetensors, type TensorBytes } from '@dtorch/external';
import { countRecords } from '../count_records.js';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/hf/single_file/${name}`, import.meta.url));
const io = readSafetensorsHeader(fixture('io.safetensors'));
const diffusersConfigs = JSON.parse(readFileSync(fixture('configs.json'), 'utf8')) as Record<string, hf.JsonObject>;
const work = mkdtempSync(join(tmpdir(), 'dtorch-single-file-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

type Model = hf.FluxTransformer2DModel | hf.SD3Transformer2DModel;
interface Case {
  name: string;
  family: 'flux' | 'sd3';
  /** What the shapes do not fix (as diffusers' config= gives it). */
  config: hf.JsonObject;
}
const cases: Case[] = [
  { name: 'tiny-flux', family: 'flux', config: { axes_dims_rope: [4, 6, 6] } },
  { name: 'tiny-sd3', family: 'sd3', config: { sample_size: 16, attention_head_dim: 8 } },
  { name: 'tiny-sd35', family: 'sd3', config: { sample_size: 8 } },
];
const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]) },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']) },
];

const load = (family: Case['family'], path: string, options?: hf.FromSingleFileOptions): Promise<Model> =>
  family === 'flux' ? hf.FluxTransformer2DModel.fromSingleFile(path, options) : hf.SD3Transformer2DModel.fromSingleFile(path, options);

// the model's output for the fixture's inputs, as diffusers' forward(...).sample
function run(name: string, model: Model, mesh: dt.DeviceMesh): dt.Tensor {
  return dt.tidy(() => {
    const t = (key: string) => fixtureTensor(io, `${name}.${key}`, { mesh });
    const common = { encoderHiddenStates: t('encoder_hidden_states'), pooledProjections: t('pooled_projections'), timestep: t('timestep') };
    if (model instanceof hf.FluxTransformer2DModel) {
      return model.call(t('hidden_states'), { ...common, guidance: t('guidance'), imgIds: t('img_ids'), txtIds: t('txt_ids') });
    }
    return model.call(t('hidden_states'), common);
  });
}

// a config's values, without where it was read from
function values(config: hf.PretrainedConfig): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).filter(([k]) => k !== 'file' && k !== 'extra'));
}
const diffusersConfig = (c: Case) =>
  c.family === 'flux' ? hf.FluxTransformer2DConfig.fromDict(diffusersConfigs[c.name]!) : hf.SD3Transformer2DConfig.fromDict(diffusersConfigs[c.name]!);

// a copy of a fixture file with its tensors renamed, left out or replaced (written to `work`)
function rewrite(source: string, target: string, change: (tensors: Record<string, TensorBytes>) => Record<string, TensorBytes>): string {
  const header = readSafetensorsHeader(fixture(source));
  const tensors: Record<string, TensorBytes> = {};
  for (const [name, e] of header.tensors) tensors[name] = { dtype: e.dtype, shape: e.shape, data: readTensorBytes(header, name) };
  const path = join(work, target);
  writeSafetensors(path, change(tensors));
  return path;
}

describe.each(meshes)('fromSingleFile on $name matches diffusers', ({ make }) => {
  it.each(cases)('$name', async (c) => {
    const before = dt.memory().numTensors;
    const mesh = make();
    const model = await load(c.family, fixture(`${c.name}.safetensors`), { mesh, config: c.config });
    expect(values(model.config), 'the config diffusers built the model with').toEqual(values(diffusersConfig(c)));
    const q = model.transformer_blocks.at(0).attn.to_q.weight;
    if (mesh.dimNames?.includes('tp')) expect(q.placements.map(String), 'q is split by heads over tp').toContain('S(0)');
    const sample = run(c.name, model, mesh);
    await expectClose(sample, fixtureTensor(io, `${c.name}.sample`, { mesh }), 1e-4, `${c.name} from a single file on ${mesh}`);
    sample.dispose();
    model.dispose();
    await dt.sync();
    expect(dt.memory().numTensors, 'no tensors left behind').toBe(before);
  });
});

describe('fromSingleFile', () => {
  it('loads packed, as fromPretrained, and in the dtype asked for', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const model = await hf.FluxTransformer2DModel.fromSingleFile(fixture('tiny-flux.safetensors'), { mesh, config: { axes_dims_rope: [4, 6, 6] } });
    const linears = () => countRecords('linear', () => dt.dispose(run('tiny-flux', model, mesh)));
    const packed = linears();
    // a replaced weight unpacks its group: the image stream's q, k and v run as three linears again
    const q = model.transformer_blocks.at(0).attn.to_q;
    q.setTensor('weight', q.weight.clone());
    expect(linears(), 'q, k and v of each stream were one matmul').toBe(packed + 2);
    model.dispose();
    const bf16 = await hf.FluxTransformer2DModel.fromSingleFile(fixture('tiny-flux.safetensors'), { mesh, config: { axes_dims_rope: [4, 6, 6] }, dtype: 'bfloat16' });
    expect([bf16.x_embedder.weight.dtype, bf16.transformer_blocks.at(0).attn.to_q.weight.dtype, bf16.norm_out.linear.weight.dtype]).toEqual(['bfloat16', 'bfloat16', 'bfloat16']);
    bf16.dispose();
  });

  it('reads the denoiser under "model.diffusion_model." and leaves the other components alone', async () => {
    const path = rewrite('tiny-flux.safetensors', 'prefixed-flux.safetensors', (tensors) => ({
      ...Object.fromEntries(Object.entries(tensors).map(([k, t]) => [`model.diffusion_model.${k}`, t])),
      'text_encoders.clip_l.transformer.text_model.final_layer_norm.weight': { dtype: 'F32', shape: [2], data: new Uint8Array(8) },
      'model.diffusion_model.double_blocks.0.extra.weight': { dtype: 'F32', shape: [2], data: new Uint8Array(8) },
    }));
    // warnings go to console.error through @dtorch/common's log
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((line: unknown) => void lines.push(String(line)));
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const model = await hf.FluxTransformer2DModel.fromSingleFile(path, { mesh, config: { axes_dims_rope: [4, 6, 6] } }).finally(() => spy.mockRestore());
    expect(lines, "the denoiser's unknown key is reported, the text encoder's is not").toEqual([expect.stringMatching(/has 1 tensors the model does not use \(ignored\): double_blocks.0.extra.weight$/)]);
    const sample = run('tiny-flux', model, mesh);
    await expectClose(sample, fixtureTensor(io, 'tiny-flux.sample', { mesh }), 1e-4, 'prefixed tiny-flux');
    dt.dispose([sample]);
    model.dispose();
  });

  it('infers from the shapes what they fix, and asks for the rest', () => {
    const [flux, sd3, sd35] = cases as [Case, Case, Case];
    const file = (c: Case) => fixture(`${c.name}.safetensors`);
    // everything but the rotary axes (FLUX.1's are for heads of 128; these are 16)
    expect(values(hf.fluxSingleFileConfig(file(flux), { axes_dims_rope: [4, 6, 6] }))).toEqual(values(diffusersConfig(flux)));
    expect(() => hf.fluxSingleFileConfig(file(flux))).toThrow(/axes_dims_rope\) are not in the weights .* FLUX.1's \[16,56,56\] are for heads of 128, not 16: pass options.config \{ axes_dims_rope \}/);
    // SD3.5's qk norms show the head width; sample_size is diffusers' default
    expect(values(hf.sd3SingleFileConfig(file(sd35)))).toEqual({ ...values(diffusersConfig(sd35)), sampleSize: 128 });
    // without qk norms the MMDiT's heads of 64 are assumed: a width of 32 needs attention_head_dim
    expect(() => hf.sd3SingleFileConfig(file(sd3))).toThrow(/32 wide \(x_embedder.proj.weight\), not a multiple of the MMDiT's heads of 64, .* pass options.config \{ attention_head_dim \}/);
    expect(values(hf.sd3SingleFileConfig(file(sd3), sd3.config))).toEqual(values(diffusersConfig(sd3)));
  });

  it('refuses an options.config that the shapes contradict, naming the key and the file', async () => {
    const path = fixture('tiny-flux.safetensors');
    const config = { axes_dims_rope: [4, 6, 6] };
    await expect(hf.FluxTransformer2DModel.fromSingleFile(path, { config: { ...config, num_layers: 2 } })).rejects.toThrow(
      /options.config gives num_layers 2, but .*tiny-flux.safetensors has 1 \(double blocks, double_blocks.N\); leave num_layers out/,
    );
    await expect(hf.FluxTransformer2DModel.fromSingleFile(path, { config: { ...config, guidance_embeds: false } })).rejects.toThrow(/guidance_embeds false, but .* has true/);
    await expect(hf.SD3Transformer2DModel.fromSingleFile(fixture('tiny-sd35.safetensors'), { config: { dual_attention_layers: [1] } })).rejects.toThrow(
      /dual_attention_layers \[1\], but .* has \[0\] \(joint blocks with x_block.attn2\)/,
    );
    await expect(hf.FluxTransformer2DModel.fromSingleFile(path, { config: 'config.json' as never })).rejects.toThrow(/Expected an object of config.json's keys for FluxTransformer2DModel.fromSingleFile config/);
    await expect(hf.FluxTransformer2DModel.fromSingleFile(path, { torch_dtype: 'float16' } as never)).rejects.toThrow(/Unknown option "torch_dtype"/);
  });
});

describe('fromSingleFile refuses bad files with what to do', () => {
  const flux = (path: string) => hf.FluxTransformer2DModel.fromSingleFile(path, { config: { axes_dims_rope: [4, 6, 6] } });
  const code = async (p: Promise<unknown>) => ((await p.catch((e: unknown) => e)) as dt.DTorchError).code;

  it('a file that is not safetensors, or no file', async () => {
    const path = join(work, 'model.ckpt');
    writeFileSync(path, 'PK\u0003\u0004 a zip of pickles, as torch.save writes');
    await expect(flux(path)).rejects.toThrow(/model.ckpt: .* it is not a whole safetensors file \(a .ckpt \/ .pt pickle must be converted to safetensors first/);
    expect(await code(flux(path))).toBe('BAD_FILE');
    expect(await code(flux(join(work, 'absent.safetensors')))).toBe('NOT_FOUND');
    await expect(flux(work)).rejects.toThrow(/is a folder; fromSingleFile reads one .safetensors file/);
  });

  it('keys of no known layout, or of another model', async () => {
    const path = rewrite('tiny-flux.safetensors', 'unknown.safetensors', (tensors) => ({ 'encoder.weight': tensors['img_in.weight']!, 'decoder.bias': tensors['img_in.bias']! }));
    await expect(flux(path)).rejects.toThrow(/unknown.safetensors is not a FLUX.1 transformer in BFL's layout .* its keys are of no layout known here \("encoder.weight", "decoder.bias"\)/);
    expect(await code(flux(path))).toBe('BAD_FILE');
    await expect(hf.SD3Transformer2DModel.fromSingleFile(fixture('tiny-flux.safetensors'))).rejects.toThrow(
      /tiny-flux.safetensors is not an SD3 transformer in its original layout .* it looks like a FLUX.1 transformer in BFL's layout: load it with FluxTransformer2DModel.fromSingleFile/,
    );
    await expect(flux(fixture('tiny-sd3.safetensors'))).rejects.toThrow(/it looks like an SD3 transformer in its original layout: load it with SD3Transformer2DModel.fromSingleFile/);
  });

  it('a missing tensor', async () => {
    const path = rewrite('tiny-flux.safetensors', 'missing.safetensors', ({ 'single_blocks.1.linear2.bias': _, ...rest }) => rest);
    await expect(flux(path)).rejects.toThrow(/missing.safetensors: has no tensor "single_blocks.1.linear2.bias"; the file is incomplete \(fetch it again\)/);
    expect(await code(flux(path))).toBe('BAD_FILE');
    const sd3 = rewrite('tiny-sd3.safetensors', 'missing-sd3.safetensors', ({ 'model.diffusion_model.joint_blocks.1.x_block.attn.qkv.weight': _, ...rest }) => rest);
    await expect(hf.SD3Transformer2DModel.fromSingleFile(sd3, { config: { attention_head_dim: 8 } })).rejects.toThrow(/has no tensor "model.diffusion_model.joint_blocks.1.x_block.attn.qkv.weight"/);
  });

  it('a truncated file', async () => {
    const path = rewrite('tiny-flux.safetensors', 'truncated.safetensors', (tensors) => tensors);
    truncateSync(path, statSync(path).size - 100);
    await expect(flux(path)).rejects.toThrow(/truncated.safetensors: .* ends at byte \d+, past the end of the file \(\d+\); it is not a whole safetensors file/);
    expect(await code(flux(path))).toBe('BAD_FILE');
  });

  it('shapes that disagree, freeing the model it had built', async () => {
    // a fused qkv of the wrong height: caught while the plan is made
    const shortQkv = rewrite('tiny-flux.safetensors', 'short-qkv.safetensors', (tensors) => {
      const t = tensors['single_blocks.0.linear1.weight']!;
      const rows = t.shape[0]! - 1;
      return { ...tensors, 'single_blocks.0.linear1.weight': { ...t, shape: [rows, t.shape[1]!], data: t.data.subarray(0, rows * t.shape[1]! * 4) } };
    });
    await expect(flux(shortQkv)).rejects.toThrow(/"single_blocks.0.linear1.weight" has 223 rows, but the model's config asks for 224 \(q, k, v and the MLP's 4 x 32: 32 \+ 32 \+ 32 \+ 128\)/);
    // an MLP of the wrong width: caught once the model is built, which is freed
    const before = dt.memory().numTensors;
    const wideMlp = rewrite('tiny-flux.safetensors', 'wide-mlp.safetensors', (tensors) => {
      const t = tensors['double_blocks.0.img_mlp.0.weight']!;
      return { ...tensors, 'double_blocks.0.img_mlp.0.weight': { ...t, shape: [t.shape[0]! / 2, t.shape[1]! * 2] } };
    });
    await expect(flux(wideMlp)).rejects.toThrow(/"transformer_blocks.0.ff.net.0.proj.weight" of the model is \[128, 32\] but the file gives \[64, 64\] \("double_blocks.0.img_mlp.0.weight"\)/);
    expect(await code(flux(wideMlp))).toBe('SHAPE_MISMATCH');
    await dt.sync();
    expect(dt.memory().numTensors, 'the model built before the failure is freed').toBe(before);
  });
});
