// T5's relative position buckets against transformers' T5Attention._relative_position_bucket at
// the real settings (32 buckets, max distance 128) for every relative position from -300 to 300
// (tools/reference/make_hf_model_fixtures.py, t5_relative_position_buckets.json), where the tiny
// models' 8 buckets over 14 tokens cannot tell a wrong max distance: the function, bidirectional
// and not, and the position bias of a T5Attention built from a config's defaults.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { T5Config } from './t5_config.js';
import { relativePositionBuckets } from './relative_position_bucket.js';
import { T5Attention } from './t5_attention.js';

interface Buckets {
  settings: { num_buckets: number; max_distance: number };
  positions: number[];
  bidirectional: number[];
  unidirectional: number[];
}
const want = JSON.parse(readFileSync(new URL('../../../../../tests/fixtures/hf/models/t5_relative_position_buckets.json', import.meta.url), 'utf8')) as Buckets;
const reach = want.positions.at(-1)!; // 300: queries and keys 0..300 see every distance -300..300
const length = reach + 1;
const mesh = new dt.DeviceMesh('cpu', [0]);

// [query, key] buckets of `length` tokens: row i, column j holds the bucket of distance j - i
async function expectBuckets(got: dt.Tensor, expected: number[], what: string): Promise<void> {
  expect(got.shape, what).toEqual([length, length]);
  const values = Array.from(await got.data(), Number);
  const wrong = new Map<number, string>(); // by distance
  for (let i = 0; i < length; i++) {
    for (let j = 0; j < length; j++) {
      const bucket = expected[j - i + reach]!;
      if (values[i * length + j] !== bucket) wrong.set(j - i, `distance ${j - i}: ${values[i * length + j]}, transformers ${bucket}`);
    }
  }
  expect([...wrong.values()].slice(0, 8), what).toEqual([]);
}

describe('relativePositionBuckets', () => {
  it.each([true, false])("gives transformers' buckets at 32 buckets and max distance 128 (bidirectional %s)", async (bidirectional) => {
    const { num_buckets: numBuckets, max_distance: maxDistance } = want.settings;
    const got = relativePositionBuckets(length, length, { bidirectional, numBuckets, maxDistance, mesh });
    await expectBuckets(got, bidirectional ? want.bidirectional : want.unidirectional, `bidirectional ${bidirectional}`);
    got.dispose();
  });

  it("reaches T5Attention's position bias with the config's defaults", async () => {
    const config = T5Config.fromDict({ d_model: 8, d_kv: 8, num_heads: 1, d_ff: 8, num_layers: 1, vocab_size: 8 });
    expect([config.relativeAttentionNumBuckets, config.relativeAttentionMaxDistance]).toEqual([want.settings.num_buckets, want.settings.max_distance]);
    const attention = new T5Attention(config, true, { mesh });
    // each bucket's bias is its own number: the bias is the bucket
    const ids = Array.from({ length: config.relativeAttentionNumBuckets }, (_, b) => [b]);
    attention.setTensor('relative_attention_bias.weight', dt.tensor(ids, { dtype: 'float32', mesh }));
    const bias = attention.positionBias(length, undefined); // [1, 1, length, length]
    const buckets = bias.reshape([length, length]);
    await expectBuckets(buckets, want.bidirectional, 'position bias');
    dt.dispose([bias, buckets]);
    attention.dispose();
  });
});
