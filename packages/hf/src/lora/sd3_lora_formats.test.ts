// sd3LoraToDiffusers: tools/reference/make_sd3_lora_fixtures.py writes tiny-sd3's "style" adapter
// (sd3-style.safetensors, diffusers' layout) in kohya's SD3 layout, checked there against diffusers'
// single-file converter (its deltas, added to the weights in the original MMDiT layout and converted,
// are the source adapter's; diffusers' own LoRA loader reads nothing of such a file). Every module's
// delta alpha / rank · B·A must equal the source adapter's scale · B·A.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { fluxLoraToDiffusers, type DiffusersLora } from './lora_formats.js';
import { readLoraFile, type LoraTensor } from './lora_state_dict.js';
import { sd3LoraToDiffusers } from './sd3_lora_formats.js';

const FIXTURES = new URL('../../../../tests/fixtures/hf/lora/', import.meta.url);
const read = (name: string) => readLoraFile(fileURLToPath(new URL(name, FIXTURES))).tensors;
const modulesJson = JSON.parse(readFileSync(new URL('modules.json', FIXTURES), 'utf8')) as Record<string, { loaded: { module: string; scale: number }[] }>;

function decode(t: LoraTensor): Float64Array {
  expect(t.dtype).toBe('F32');
  const view = new DataView(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength);
  return Float64Array.from({ length: t.bytes.byteLength / 4 }, (_, i) => view.getFloat32(4 * i, true));
}

function f32(shape: number[], values: ArrayLike<number>): LoraTensor {
  return { dtype: 'F32', shape, bytes: new Uint8Array(Float32Array.from(values).buffer) };
}

/** scale · B·A in float64, row-major [out, in]. */
function delta(a: LoraTensor, b: LoraTensor, scale: number): Float64Array {
  const [rank, inner] = a.shape as [number, number];
  const [av, bv] = [decode(a), decode(b)];
  const d = new Float64Array(b.shape[0]! * inner);
  for (let o = 0; o < b.shape[0]!; o++) {
    for (let r = 0; r < rank; r++) for (let i = 0; i < inner; i++) d[o * inner + i]! += bv[o * rank + r]! * scale * av[r * inner + i]!;
  }
  return d;
}

/** max |got - want| / max |want|. */
function relativeError(got: Float64Array, want: Float64Array): number {
  expect(got.length).toBe(want.length);
  let [err, size] = [0, 0];
  for (let i = 0; i < want.length; i++) [err, size] = [Math.max(err, Math.abs(got[i]! - want[i]!)), Math.max(size, Math.abs(want[i]!))];
  return err / size;
}

const ours = (lora: DiffusersLora, name: string) => {
  const m = lora.modules.get(name)!;
  return delta(m.a, m.b, m.alpha! / m.a.shape[0]!);
};

// the source adapter (diffusers' layout) and its scales as PEFT loaded them (the metadata's alphas)
const style = fluxLoraToDiffusers(read('sd3-style.safetensors'));
const sourceScale = new Map(modulesJson['sd3-style.safetensors']!.loaded.map((m) => [m.module, m.scale]));
const sourceDelta = (name: string) => delta(style.modules.get(name)!.a, style.modules.get(name)!.b, sourceScale.get(name)!);
const kohya = read('sd3-style-kohya.safetensors');

describe("kohya's SD3 layout", () => {
  test('sd3-style-kohya.safetensors gives every module of the source adapter, with its delta', () => {
    const lora = sd3LoraToDiffusers(kohya);
    expect(lora.layout).toBe('kohya');
    expect(lora.unknown).toEqual([]);
    expect([...lora.modules.keys()].sort()).toEqual([...style.modules.keys()].sort());
    expect(lora.modules.size).toBe(56);
    for (const name of style.modules.keys()) {
      expect(relativeError(ours(lora, name), sourceDelta(name)), name).toBeLessThanOrEqual(1e-6);
      expect(lora.modules.get(name)!.a.dtype).toBe('F32');
    }
  });

  test("sd-scripts' split_qkv (A's stacked, B block-diagonal) gives q, k and v their own A, B, rank and alpha back", () => {
    const lora = sd3LoraToDiffusers(kohya);
    expect(kohya.get('lora_unet_joint_blocks_0_x_block_attn_qkv.lora_up.weight')!.shape).toEqual([96, 12]);
    for (const [name, rank, alpha] of [['transformer.transformer_blocks.0.attn.to_k', 4, 8], ['transformer.transformer_blocks.1.attn.add_v_proj', 3, 6]] as const) {
      const m = lora.modules.get(name)!;
      expect(m.a.shape[0]).toBe(rank);
      expect(m.alpha).toBe(alpha);
      expect(m.a.bytes).toEqual(style.modules.get(name)!.a.bytes);
      expect(m.b.bytes).toEqual(style.modules.get(name)!.b.bytes);
    }
  });

  test('a fused qkv with one A splits B by rows, each of q, k, v keeping A whole and the alpha', () => {
    const [inner, rank, out] = [5, 2, 4];
    const down = f32([rank, inner], Array.from({ length: rank * inner }, (_, i) => Math.sin(i + 1)));
    const up = f32([3 * out, rank], Array.from({ length: 3 * out * rank }, (_, i) => Math.cos(i + 1)));
    const lora = sd3LoraToDiffusers(new Map([
      ['lora_unet_joint_blocks_3_context_block_attn_qkv.lora_down.weight', down],
      ['lora_unet_joint_blocks_3_context_block_attn_qkv.lora_up.weight', up],
      ['lora_unet_joint_blocks_3_context_block_attn_qkv.alpha', f32([], [1])],
    ]));
    const whole = delta(down, up, 1 / rank);
    ['add_q_proj', 'add_k_proj', 'add_v_proj'].forEach((m, j) => {
      const name = `transformer.transformer_blocks.3.attn.${m}`;
      expect(lora.modules.get(name)!.a).toBe(down);
      expect(lora.modules.get(name)!.alpha).toBe(1);
      expect(relativeError(ours(lora, name), whole.subarray(j * out * inner, (j + 1) * out * inner))).toBeLessThanOrEqual(1e-12);
    });
  });

  test("the final adaLN and the last block's context adaLN (2 parts) have B's (shift, scale) halves swapped; the other blocks' (6 parts) not", () => {
    const lora = sd3LoraToDiffusers(kohya);
    const swapped = (t: LoraTensor) => Buffer.concat([t.bytes.subarray(t.bytes.byteLength / 2), t.bytes.subarray(0, t.bytes.byteLength / 2)]);
    for (const [key, module, swaps] of [
      ['lora_unet_final_layer_adaLN_modulation_1', 'norm_out.linear', true],
      ['lora_unet_joint_blocks_1_context_block_adaLN_modulation_1', 'transformer_blocks.1.norm1_context.linear', true],
      ['lora_unet_joint_blocks_0_context_block_adaLN_modulation_1', 'transformer_blocks.0.norm1_context.linear', false],
    ] as const) {
      const up = kohya.get(`${key}.lora_up.weight`)!;
      const b = lora.modules.get(`transformer.${module}`)!.b;
      expect(Buffer.from(b.bytes), key).toEqual(swaps ? swapped(up) : Buffer.from(up.bytes));
    }
  });

  test('lists what it does not read: the patch convolution, T5 (lora_te3_), norms, other names, DoRA scales', () => {
    const t = kohya.get('lora_unet_final_layer_linear.lora_down.weight')!;
    const odd = [
      'lora_unet_x_embedder_proj.lora_down.weight',
      'lora_te3_encoder_block_0_layer_0_SelfAttention_q.lora_down.weight',
      'lora_unet_joint_blocks_0_x_block_attn_ln_q.lora_down.weight',
      'lora_unet_double_blocks_0_img_attn_qkv.lora_up.weight',
      'something_else',
      'lora_unet_final_layer_linear.dora_scale',
    ];
    const lora = sd3LoraToDiffusers(new Map([...kohya, ...odd.map((k) => [k, t] as const)]));
    expect(lora.unknown.sort()).toEqual([...odd].sort());
    expect(lora.modules.size).toBe(56);
  });
});

describe("diffusers' layout", () => {
  test('goes through as fluxLoraToDiffusers reads it (as before)', () => {
    const file = read('sd3-style.safetensors');
    const lora = sd3LoraToDiffusers(file);
    expect(lora.layout).toBe('diffusers');
    expect(lora).toEqual(fluxLoraToDiffusers(file));
  });
});

describe('bad files', () => {
  const a = f32([2, 3], [1, 2, 3, 4, 5, 6]);
  const b = f32([4, 2], [1, 0, 0, 1, 1, 1, 2, 2]);
  const convert = (entries: [string, LoraTensor][]) => () => sd3LoraToDiffusers(new Map(entries));
  const badFile = (message: RegExp) => expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(message) });

  test('a down without its up, an up without its down', () => {
    expect(convert([['lora_unet_context_embedder.lora_down.weight', a]])).toThrow(badFile(/"lora_unet_context_embedder.lora_down.weight": has no matching up weight \("lora_unet_context_embedder.lora_up.weight"\)/));
    expect(convert([['lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_up.weight', b]])).toThrow(badFile(/"lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_up.weight": has no matching down weight/));
  });

  test('ranks of down and up that differ, a tensor that is not a matrix, a fused up that does not split', () => {
    const up3 = f32([4, 3], new Float32Array(12));
    expect(convert([['lora_unet_joint_blocks_0_x_block_attn_proj.lora_down.weight', a], ['lora_unet_joint_blocks_0_x_block_attn_proj.lora_up.weight', up3]])).toThrow(
      badFile(/"lora_unet_joint_blocks_0_x_block_attn_proj.lora_up.weight": has rank 3 .* has rank 2/),
    );
    expect(convert([['lora_unet_final_layer_linear.lora_down.weight', f32([6], new Float32Array(6))], ['lora_unet_final_layer_linear.lora_up.weight', b]])).toThrow(badFile(/lora_down.weight": has shape \[6\]/));
    const up5 = f32([5, 2], new Float32Array(10).fill(1));
    expect(convert([['lora_unet_joint_blocks_0_x_block_attn_qkv.lora_down.weight', a], ['lora_unet_joint_blocks_0_x_block_attn_qkv.lora_up.weight', up5]])).toThrow(badFile(/attn_qkv.lora_up.weight": has 5 rows, not a multiple of 3/));
  });

  test("the layouts DTorch reads for Flux only (XLabs', BFL's with lora_A / lora_B) are refused, naming a key", () => {
    expect(convert([['double_blocks.0.processor.qkv_lora1.down.weight', a]])).toThrow(badFile(/"double_blocks.0.processor.qkv_lora1.down.weight": has XLabs' processor names, a layout DTorch reads for Flux only/));
    expect(convert([['diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight', a]])).toThrow(badFile(/has BFL's \/ ComfyUI's names .* for Flux only/));
  });
});
