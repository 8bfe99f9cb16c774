// fluxLoraToDiffusers against diffusers: tools/reference/make_lora_fixtures.py writes the "style"
// adapter in diffusers' layout and in kohya / ComfyUI-BFL / XLabs layouts, with what
// FluxPipeline.lora_state_dict returns for each (alpha folded in); every module's delta
// alpha / rank · B·A must equal diffusers' B·A and the source adapter's scale · B·A.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { fluxLoraToDiffusers, type DiffusersLora } from './lora_formats.js';
import { readLoraFile, type LoraTensor } from './lora_state_dict.js';

const FIXTURES = new URL('../../../../tests/fixtures/hf/lora/', import.meta.url);
const read = (name: string) => readLoraFile(fileURLToPath(new URL(name, FIXTURES))).tensors;
const modulesJson = JSON.parse(readFileSync(new URL('modules.json', FIXTURES), 'utf8')) as Record<string, { loaded: { module: string; rank: number; alpha: number; scale: number }[] }>;

// ---- host-side numbers ----

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
  const out = b.shape[0]!;
  const av = decode(a);
  const bv = decode(b);
  const d = new Float64Array(out * inner);
  for (let o = 0; o < out; o++) {
    for (let r = 0; r < rank; r++) {
      const w = bv[o * rank + r]! * scale;
      for (let i = 0; i < inner; i++) d[o * inner + i]! += w * av[r * inner + i]!;
    }
  }
  return d;
}

/** max |got - want| / max |want|. */
function relativeError(got: Float64Array, want: Float64Array): number {
  expect(got.length).toBe(want.length);
  let err = 0;
  let size = 0;
  for (let i = 0; i < want.length; i++) {
    err = Math.max(err, Math.abs(got[i]! - want[i]!));
    size = Math.max(size, Math.abs(want[i]!));
  }
  return err / size;
}

const ours = (lora: DiffusersLora, name: string) => {
  const m = lora.modules.get(name)!;
  return delta(m.a, m.b, m.alpha! / m.a.shape[0]!);
};

/** A diffusers state dict's modules by `<component>.<path>`: unprefixed keys are the transformer's; the text encoder's old keys (to_q_lora.down, lora_linear_layer.up) named as PEFT names them. */
function diffusersModules(tensors: ReadonlyMap<string, LoraTensor>): Map<string, { a: LoraTensor; b: LoraTensor }> {
  const modules = new Map<string, { a?: LoraTensor; b?: LoraTensor }>();
  for (const [key, t] of tensors) {
    const peft = /^(.+)\.lora_(A|B)\.weight$/.exec(key);
    const old = /^(.+)\.(?:to_(q|k|v|out)_lora|lora_linear_layer)\.(down|up)\.weight$/.exec(key);
    expect(peft ?? old, key).toBeTruthy();
    let path = peft ? peft[1]! : old![1]! + (old![2] ? `.${old![2]}_proj` : '');
    if (!/^(transformer|text_encoder)\./.test(path)) path = `transformer.${path}`;
    const entry = modules.get(path) ?? {};
    entry[(peft ? peft[2] === 'A' : old![3] === 'down') ? 'a' : 'b'] = t;
    modules.set(path, entry);
  }
  return modules as Map<string, { a: LoraTensor; b: LoraTensor }>;
}

// the source adapter: diffusers' layout, scales as PEFT loaded them (alpha / rank from the metadata)
const source = diffusersModules(read('flux-style.safetensors'));
const sourceScale = new Map(modulesJson['flux-style.safetensors']!.loaded.map((m) => [m.module, m.scale]));

describe('layouts converted by diffusers', () => {
  test.each([
    ['flux-style-kohya.safetensors', 'kohya', 40],
    // BFL's names with lora_down: diffusers' kohya converter, through its ComfyUI branch
    ['flux-style-bfl.safetensors', 'kohya', 40],
    ['flux-xlabs.safetensors', 'xlabs', 8],
  ] as const)('%s gives the modules and deltas of diffusers and of the source adapter', (file, layout, count) => {
    const lora = fluxLoraToDiffusers(read(file));
    const reference = diffusersModules(read(file.replace('.safetensors', '.diffusers.safetensors')));
    expect(lora.layout).toBe(layout);
    expect(lora.unknown).toEqual([]);
    expect([...lora.modules.keys()].sort()).toEqual([...reference.keys()].sort());
    expect(lora.modules.size).toBe(count);
    for (const [name, { a, b }] of reference) {
      const got = ours(lora, name);
      expect(relativeError(got, delta(a, b, 1)), `${name} vs diffusers`).toBeLessThanOrEqual(1e-5);
      const src = source.get(name)!;
      expect(relativeError(got, delta(src.a, src.b, sourceScale.get(name)!)), `${name} vs the source`).toBeLessThanOrEqual(1e-5);
      expect(lora.modules.get(name)!.a.dtype).toBe('F32');
    }
  });

  test("kohya's norm_out.linear is BFL's final adaLN with the (shift, scale) halves of B swapped", () => {
    const file = read('flux-style-kohya.safetensors');
    const up = file.get('lora_unet_final_layer_adaLN_modulation_1.lora_up.weight')!;
    const b = fluxLoraToDiffusers(file).modules.get('transformer.norm_out.linear')!.b;
    const half = up.bytes.byteLength / 2;
    expect(b.shape).toEqual(up.shape);
    expect(Buffer.from(b.bytes)).toEqual(Buffer.concat([up.bytes.subarray(half), up.bytes.subarray(0, half)]));
  });

  test("BFL's names with lora_A / lora_B (which diffusers leaves unconverted) give what their lora_down / lora_up form gives", () => {
    const comfy = read('flux-style-bfl.safetensors');
    const renamed = new Map([...comfy].map(([k, t]) => [k.replace('.lora_down.', '.lora_A.').replace('.lora_up.', '.lora_B.'), t]));
    const bare = new Map([...renamed].map(([k, t]) => [k.replace(/^diffusion_model\./, ''), t]));
    const want = fluxLoraToDiffusers(comfy);
    for (const lora of [fluxLoraToDiffusers(renamed), fluxLoraToDiffusers(bare)]) {
      expect(lora.layout).toBe('bfl');
      expect(lora.unknown).toEqual([]);
      expect([...lora.modules.keys()].sort()).toEqual([...want.modules.keys()].sort());
      for (const [name, m] of want.modules) expect(lora.modules.get(name)).toEqual(m);
    }
  });

  test('keeps F16 / BF16 and moves the bytes of B rows', () => {
    // the kohya file as bfloat16: the high half of each float32
    const bf16 = (t: LoraTensor): LoraTensor => ({ dtype: 'BF16', shape: t.shape, bytes: Uint8Array.from({ length: t.bytes.byteLength / 2 }, (_, i) => t.bytes[4 * Math.floor(i / 2) + 2 + (i % 2)]!) });
    const file = new Map([...read('flux-style-kohya.safetensors')].map(([k, t]) => [k, bf16(t)]));
    const lora = fluxLoraToDiffusers(file);
    expect([...lora.modules.values()].every((m) => m.a.dtype === 'BF16' && m.b.dtype === 'BF16')).toBe(true);
    const up = file.get('lora_unet_double_blocks_0_img_attn_qkv.lora_up.weight')!;
    const rowBytes = up.shape[1]! * 2;
    expect(lora.modules.get('transformer.transformer_blocks.0.attn.to_k')!.b.bytes).toEqual(up.bytes.subarray(32 * rowBytes, 64 * rowBytes));
    // alpha 8 at rank 4, read from a bfloat16 scalar
    expect(lora.modules.get('transformer.transformer_blocks.0.attn.to_k')!.alpha).toBe(8);
  });
});

describe('diffusers layout', () => {
  test('round-trips flux-style.safetensors: keys, shapes and bytes', () => {
    const file = read('flux-style.safetensors');
    const lora = fluxLoraToDiffusers(file);
    expect(lora.layout).toBe('diffusers');
    expect(lora.unknown).toEqual([]);
    const keys = [...lora.modules.keys()].flatMap((m) => [`${m}.lora_A.weight`, `${m}.lora_B.weight`]);
    expect(keys.sort()).toEqual([...file.keys()].sort());
    for (const [name, m] of lora.modules) {
      for (const [t, suffix] of [[m.a, 'lora_A'], [m.b, 'lora_B']] as const) {
        const want = file.get(`${name}.${suffix}.weight`)!;
        expect(t.shape).toEqual(want.shape);
        expect(t.bytes).toEqual(want.bytes);
      }
      expect(m.alpha).toBeUndefined(); // the metadata's: the caller's to read
    }
    for (const { module, rank } of modulesJson['flux-style.safetensors']!.loaded) expect(lora.modules.get(module)!.a.shape[0]).toBe(rank);
  });

  test("PEFT's adapter-named and unprefixed keys, and alpha keys", () => {
    const a = f32([2, 3], [1, 2, 3, 4, 5, 6]);
    const b = f32([4, 2], [1, 0, 0, 1, 1, 1, 2, 2]);
    const lora = fluxLoraToDiffusers(new Map([
      ['transformer_blocks.0.attn.to_q.lora_A.default.weight', a],
      ['transformer_blocks.0.attn.to_q.lora_B.default.weight', b],
      ['transformer_blocks.0.attn.to_q.alpha', f32([], [4])],
      ['text_encoder_2.encoder.block.0.layer.0.SelfAttention.q.lora_A.weight', a],
      ['text_encoder_2.encoder.block.0.layer.0.SelfAttention.q.lora_B.weight', b],
    ]));
    expect(lora.modules.get('transformer.transformer_blocks.0.attn.to_q')).toEqual({ a, b, alpha: 4 });
    expect(lora.modules.get('text_encoder_2.encoder.block.0.layer.0.SelfAttention.q')).toEqual({ a, b });
  });
});

// a kohya pair from the source adapter's tied modules: down = their shared A, up = their B's stacked
function fused(names: string[]): { down: LoraTensor; up: LoraTensor } {
  const parts = names.map((n) => source.get(n)!);
  const up = Buffer.concat(parts.map((p) => p.b.bytes));
  return { down: parts[0]!.a, up: { dtype: 'F32', shape: [parts.reduce((s, p) => s + p.b.shape[0]!, 0), parts[0]!.b.shape[1]!], bytes: new Uint8Array(up) } };
}

describe('kohya', () => {
  test("a single block's linear1 splits into to_q, to_k, to_v, proj_mlp (diffusers' 1:1:1:4), each with the whole A and alpha", () => {
    const names = ['attn.to_q', 'attn.to_k', 'attn.to_v', 'proj_mlp'].map((m) => `transformer.single_transformer_blocks.1.${m}`);
    const { down, up } = fused(names);
    const lora = fluxLoraToDiffusers(new Map([
      ['lora_unet_single_blocks_1_linear1.lora_down.weight', down],
      ['lora_unet_single_blocks_1_linear1.lora_up.weight', up],
      ['lora_unet_single_blocks_1_linear1.alpha', f32([], [3])],
    ]));
    expect([...lora.modules.keys()]).toEqual(names);
    for (const name of names) {
      const m = lora.modules.get(name)!;
      expect(m.alpha).toBe(3);
      expect(m.a).toEqual(down);
      expect(m.b.bytes).toEqual(source.get(name)!.b.bytes);
      expect(relativeError(ours(lora, name), delta(source.get(name)!.a, source.get(name)!.b, sourceScale.get(name)!))).toBeLessThanOrEqual(1e-6);
    }
  });

  test("a block-diagonal fused B splits A's rows too (diffusers' sparse case): rank / 3 and alpha / 3 each, the same deltas", () => {
    const [inner, rank, out] = [5, 6, 4];
    const down = f32([rank, inner], Array.from({ length: rank * inner }, (_, i) => Math.sin(i + 1)));
    const up = f32([3 * out, rank], Array.from({ length: 3 * out * rank }, (_, i) => (Math.floor(Math.floor(i / rank) / out) === Math.floor((i % rank) / 2) ? Math.cos(i) : 0)));
    const lora = fluxLoraToDiffusers(new Map([
      ['lora_unet_double_blocks_2_txt_attn_qkv.lora_down.weight', down],
      ['lora_unet_double_blocks_2_txt_attn_qkv.lora_up.weight', up],
      ['lora_unet_double_blocks_2_txt_attn_qkv.alpha', f32([], [12])],
    ]));
    const whole = delta(down, up, 12 / rank);
    ['add_q_proj', 'add_k_proj', 'add_v_proj'].forEach((m, j) => {
      const part = lora.modules.get(`transformer.transformer_blocks.2.attn.${m}`)!;
      expect(part.a.shape).toEqual([2, inner]);
      expect(part.b.shape).toEqual([out, 2]);
      expect(part.alpha).toBe(4);
      expect(relativeError(ours(lora, `transformer.transformer_blocks.2.attn.${m}`), whole.subarray(j * out * inner, (j + 1) * out * inner))).toBeLessThanOrEqual(1e-12);
    });
  });

  test("diffusers' mixture branch (kohya names of diffusers' own modules) and a file with PEFT keys besides", () => {
    const a = f32([2, 3], [1, 2, 3, 4, 5, 6]);
    const b = f32([4, 2], [1, 0, 0, 1, 1, 1, 2, 2]);
    const mixture = fluxLoraToDiffusers(new Map([
      ['lora_transformer_single_transformer_blocks_0_proj_mlp.lora_down.weight', a],
      ['lora_transformer_single_transformer_blocks_0_proj_mlp.lora_up.weight', b],
      ['lora_transformer_single_transformer_blocks_0_proj_mlp.alpha', f32([], [1])],
      ['lora_transformer_time_text_embed_guidance_embedder_linear_1.lora_down.weight', a],
      ['lora_transformer_time_text_embed_guidance_embedder_linear_1.lora_up.weight', b],
      ['lora_unet_img_in.lora_down.weight', a],
    ]));
    expect(mixture.layout).toBe('kohya');
    expect(mixture.modules.get('transformer.single_transformer_blocks.0.proj_mlp')).toEqual({ a, b, alpha: 1 });
    expect(mixture.modules.get('transformer.time_text_embed.guidance_embedder.linear_1')).toEqual({ a, b, alpha: 2 });
    expect(mixture.unknown).toEqual(['lora_unet_img_in.lora_down.weight']);

    const peft = fluxLoraToDiffusers(new Map([
      ['transformer.x_embedder.lora_down.weight', a],
      ['transformer.x_embedder.lora_up.weight', b],
      ['transformer.x_embedder.alpha', f32([], [1])],
      ['lora_unet_img_in.lora_down.weight', a],
    ]));
    expect([...peft.modules]).toEqual([['transformer.x_embedder', { a, b }]]);
    expect(peft.unknown.sort()).toEqual(['lora_unet_img_in.lora_down.weight', 'transformer.x_embedder.alpha']);
  });
});

describe('unknown keys', () => {
  const file = read('flux-style-kohya.safetensors');
  test('are listed, and the rest converted', () => {
    const extra = new Map(file);
    const t = file.get('lora_unet_img_in.lora_down.weight')!;
    const odd = ['lora_unet_double_blocks_0_img_attn_norm_query_norm.lora_down.weight', 'lora_te2_encoder_block_0_layer_0_SelfAttention_q.lora_down.weight', 'something_else'];
    for (const k of odd) extra.set(k, t);
    // a final_layer alpha that is not the rank: diffusers runs those with scale 1
    extra.set('lora_unet_final_layer_linear.alpha', f32([], [1]));
    const lora = fluxLoraToDiffusers(extra);
    expect(lora.unknown.sort()).toEqual([...odd, 'lora_unet_final_layer_linear.alpha'].sort());
    expect(lora.modules.size).toBe(40);
    expect(lora.modules.get('transformer.proj_out')!.alpha).toBe(4);
  });

  test("DoRA's dora_scale is listed and the LoRA converted without it", () => {
    const withDora = new Map(file).set('lora_unet_img_in.dora_scale', f32([1, 32], new Float32Array(32)));
    const lora = fluxLoraToDiffusers(withDora);
    expect(lora.unknown).toEqual(['lora_unet_img_in.dora_scale']);
    expect(lora.modules.size).toBe(40);
  });

  test('in the diffusers layout', () => {
    const file = new Map(read('flux-style.safetensors')).set('transformer.proj_out.lora_B.bias', f32([64], new Float32Array(64))).set('transformer.foo.alpha', f32([], [1]));
    expect(fluxLoraToDiffusers(file).unknown.sort()).toEqual(['transformer.foo.alpha', 'transformer.proj_out.lora_B.bias']);
  });
});

describe('bad files', () => {
  const a = f32([2, 3], [1, 2, 3, 4, 5, 6]);
  const b = f32([4, 2], [1, 0, 0, 1, 1, 1, 2, 2]);
  const convert = (entries: [string, LoraTensor][]) => () => fluxLoraToDiffusers(new Map(entries));

  test('lora_down without lora_up', () => {
    expect(convert([['lora_unet_img_in.lora_down.weight', a]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/"lora_unet_img_in.lora_down.weight": has no matching up weight \("lora_unet_img_in.lora_up.weight"\)/) }));
    expect(convert([['diffusion_model.img_in.lora_B.weight', b]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/"diffusion_model.img_in.lora_B.weight": has no matching down weight \("diffusion_model.img_in.lora_A.weight"\)/) }));
    expect(convert([['transformer.proj_out.lora_A.weight', a]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/proj_out.lora_A.weight.*no matching lora_B/) }));
  });

  test('ranks of down and up that differ', () => {
    const up3 = f32([4, 3], new Float32Array(12));
    expect(convert([['lora_unet_img_in.lora_down.weight', a], ['lora_unet_img_in.lora_up.weight', up3]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/"lora_unet_img_in.lora_up.weight": has rank 3 .* has rank 2/) }));
    expect(convert([['diffusion_model.img_in.lora_A.weight', a], ['diffusion_model.img_in.lora_B.weight', up3]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/"diffusion_model.img_in.lora_B.weight": has rank 3 .* "diffusion_model.img_in.lora_A.weight" has rank 2/) }));
    expect(convert([['x_embedder.lora_A.weight', a], ['x_embedder.lora_B.weight', up3]])).toThrow(expect.objectContaining({ code: 'BAD_FILE' }));
  });

  test('a tensor that is not a matrix, a fused up that does not split, a non-scalar alpha', () => {
    expect(convert([['lora_unet_img_in.lora_down.weight', f32([6], new Float32Array(6))], ['lora_unet_img_in.lora_up.weight', b]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/lora_down.weight": has shape \[6\]/) }));
    expect(convert([['lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight', a], ['lora_unet_double_blocks_0_img_attn_qkv.lora_up.weight', b]])).toThrow(expect.objectContaining({ code: 'BAD_FILE', message: expect.stringMatching(/4 rows, not a multiple of 3/) }));
    expect(convert([['lora_unet_img_in.lora_down.weight', a], ['lora_unet_img_in.lora_up.weight', b], ['lora_unet_img_in.alpha', f32([2], [1, 1])]])).toThrow(expect.objectContaining({ code: 'BAD_FILE' }));
  });
});
