// FP8 checkpoints as they are shared (tools/reference/make_fp8_fixtures.py writes tiny-flux's
// transformer in each layout): per-row `weight_scale` [out, 1] (compressed-tensors, FBGEMM,
// torchao), one `scale_weight` per tensor with the `scaled_fp8` marker (ComfyUI), FP8 weights
// without scales (Kijai's flux1-dev-fp8), and float8_e5m2 weights. Each loads with
// FluxTransformer2DModel.fromPretrained, the file's bytes kept as they are (e5m2 quantized again
// per row), and one call equals PyTorch's with the same weights and the recipe's activations, on
// 1 CPU device and on 'tp' 2; so does a ComfyUI scaled FP8 file in BFL's single-file layout
// (fromSingleFile: the fused qkv and linear1 rows keep their tensor's scale). A scale of the wrong
// size is an error naming it.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader, writeSafetensors } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { relativeError } from './expect_close.js';

const root = fileURLToPath(new URL('../fixtures/fp8/', import.meta.url));
const references = readSafetensorsHeader(join(root, 'checkpoints.safetensors'));
const TOLERANCE = 1e-5;

async function output(model: hf.FluxTransformer2DModel, mesh: dt.DeviceMesh): Promise<dt.Tensor> {
  const t = (name: string) => fixtureTensor(references, `inputs.${name}`, { mesh });
  const out = model.call(t('hidden_states'), {
    encoderHiddenStates: t('encoder_hidden_states'), pooledProjections: t('pooled_projections'), timestep: t('timestep'), guidance: t('guidance'),
    imgIds: t('img_ids'), txtIds: t('txt_ids'),
  });
  return out.redistribute(out.placements.map(() => dt.Replicate()));
}

describe.each([
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]) },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']) },
])('FP8 checkpoints on $name', ({ make }) => {
  it.each(['channel', 'tensor', 'plain', 'e5m2'])('%s', async (layout) => {
    const mesh = make();
    const model = await hf.FluxTransformer2DModel.fromPretrained(join(root, 'checkpoints', layout), { mesh });
    try {
      const toQ = model.transformer_blocks.at(0).attn.to_q;
      expect(toQ.weight.dtype).toBe('float8_e4m3fn');
      expect(toQ.weight_scale!.shape).toEqual([toQ.outFeatures]);
      expect(model.x_embedder.weight.dtype).toBe('float32'); // float in the file: float here
      const got = await output(model, mesh);
      const want = fixtureTensor(references, `${layout}.output`);
      expect(await relativeError(got, want, layout)).toBeLessThanOrEqual(TOLERANCE);
      dt.dispose([got, want]);
    } finally {
      model.dispose();
    }
  });
});

describe.each([
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]) },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']) },
])("a ComfyUI scaled FP8 file in BFL's layout on $name", ({ make }) => {
  it('loads with fromSingleFile, the fused qkv rows keeping their tensor scales, and matches PyTorch', async () => {
    const mesh = make();
    const io = readSafetensorsHeader(fileURLToPath(new URL('../fixtures/hf/single_file/io.safetensors', import.meta.url)));
    const model = await hf.FluxTransformer2DModel.fromSingleFile(join(root, 'single_file', 'tiny-flux-fp8-scaled.safetensors'), { mesh, config: { axes_dims_rope: [4, 6, 6] } });
    try {
      expect(model.single_transformer_blocks.at(0).attn.to_k.weight.dtype).toBe('float8_e4m3fn');
      expect(model.transformer_blocks.at(0).norm1.linear.weight.dtype).toBe('float32'); // the modulation stays float in the file
      const t = (name: string) => fixtureTensor(io, `tiny-flux.${name}`, { mesh });
      const out = model.call(t('hidden_states'), {
        encoderHiddenStates: t('encoder_hidden_states'), pooledProjections: t('pooled_projections'), timestep: t('timestep'), guidance: t('guidance'),
        imgIds: t('img_ids'), txtIds: t('txt_ids'),
      });
      const got = out.redistribute(out.placements.map(() => dt.Replicate()));
      const want = fixtureTensor(references, 'single_file.output');
      expect(await relativeError(got, want)).toBeLessThanOrEqual(TOLERANCE);
      dt.dispose([got, want]);
    } finally {
      model.dispose();
    }
  });
});

describe('FP8 checkpoints with bad scales', () => {
  it('refuses a scale that is neither one per row nor one per tensor', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-fp8-'));
    try {
      copyFileSync(join(root, 'checkpoints', 'channel', 'config.json'), join(dir, 'config.json'));
      const source = join(root, 'checkpoints', 'channel', 'diffusion_pytorch_model.safetensors');
      const header = readSafetensorsHeader(source);
      const tensors: Record<string, { dtype: string; shape: number[]; data: Uint8Array }> = {};
      const bytes = readFileSync(source);
      for (const [name, e] of header.tensors) tensors[name] = { dtype: e.dtype, shape: e.shape, data: bytes.subarray(e.begin, e.end) };
      const key = 'transformer_blocks.0.attn.to_q.weight_scale';
      tensors[key] = { dtype: 'F32', shape: [3], data: new Uint8Array(12) };
      writeSafetensors(join(dir, 'diffusion_pytorch_model.safetensors'), tensors as never);
      await expect(hf.FluxTransformer2DModel.fromPretrained(dir)).rejects.toThrow(/"transformer_blocks.0.attn.to_q.weight_scale" holds 3 scales; an FP8 weight of 32 rows takes one per row or one for the tensor/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
