import { describe, expect, it } from 'vitest';
import { ConfigReader } from './config_file.js';
import { CLIPTextConfig } from '../models/clip/clip_text_config.js';
import { T5Config } from '../models/t5/t5_config.js';

describe('ConfigReader', () => {
  it('reads typed values with defaults, and names the file and key when one is missing or of the wrong type', () => {
    const r = new ConfigReader('/m/config.json', { a: 3, b: 'x', c: null, d: 1.5, e: true });
    expect(r.integer('a')).toBe(3);
    expect(r.integer('zz', 7)).toBe(7);
    expect(r.optionalInteger('c', 5)).toBe(null);
    expect(r.number('d')).toBe(1.5);
    expect(r.boolean('e')).toBe(true);
    expect(() => r.integer('missing')).toThrow('/m/config.json: "missing" must be an integer; it is missing');
    expect(() => r.integer('d')).toThrow('/m/config.json: "d" must be an integer; got 1.5');
    expect(() => r.string('a')).toThrow('"a" must be a string; got 3');
    expect(() => r.oneOf('b', ['y', 'z'])).toThrow('"b" must be one of "y", "z"; got "x"');
    expect(() => r.integer('c')).toThrow('"c" must be an integer; it is missing');
    expect(r.unread()).toEqual({});
    expect(new ConfigReader('f', { kept: 1, read: 2 }).unread()).toEqual({ kept: 1, read: 2 });
  });
});

describe('model configs', () => {
  it("T5Config: transformers' defaults, feed_forward_proj parsed as transformers parses it, unknown keys kept", () => {
    const v11 = T5Config.fromDict({ d_model: 4096, feed_forward_proj: 'gated-gelu', custom_key: [1, 2], dense_act_fn: 'gelu_new', dtype: 'bfloat16' });
    expect([v11.dModel, v11.dKv, v11.numHeads, v11.relativeAttentionNumBuckets, v11.layerNormEpsilon]).toEqual([4096, 64, 8, 32, 1e-6]);
    expect([v11.isGatedAct, v11.denseActFn, v11.dtype]).toEqual([true, 'gelu_new', 'bfloat16']);
    expect(v11.extra).toEqual({ custom_key: [1, 2] });
    const v10 = T5Config.fromDict({});
    expect([v10.isGatedAct, v10.denseActFn, v10.dtype, v10.vocabSize]).toEqual([false, 'relu', undefined, 32128]);
    expect(T5Config.fromDict({ feed_forward_proj: 'gated-silu' }).denseActFn).toBe('silu');
    expect(() => T5Config.fromDict({ torch_dtype: 'float8' })).toThrow('"torch_dtype" must be one of float32, float16, bfloat16, float64; got "float8"');
    expect(() => T5Config.fromDict({ num_heads: 0 })).toThrow('"num_heads" must be a positive integer; got 0');
  });

  it("CLIPTextConfig: transformers' defaults; a CLIPModel config gives its text_config", () => {
    const c = CLIPTextConfig.fromDict({});
    expect([c.hiddenSize, c.numHiddenLayers, c.maxPositionEmbeddings, c.hiddenAct, c.eosTokenId, c.padTokenId]).toEqual([512, 12, 77, 'quick_gelu', 49407, 1]);
    const full = CLIPTextConfig.fromDict({ projection_dim: 768, text_config: { hidden_size: 768, num_attention_heads: 12, eos_token_id: 2 }, vision_config: {} });
    expect([full.hiddenSize, full.headDim, full.eosTokenId]).toEqual([768, 64, 2]);
    expect(() => CLIPTextConfig.fromDict({ hidden_size: 100, num_attention_heads: 12 })).toThrow('"hidden_size" must be a multiple of num_attention_heads (12); got 100');
  });
});
