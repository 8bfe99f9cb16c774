// readSentencePieceModel on the tiny T5 tokenizer's spiece.model (assets/tiny-tokenizers/t5: trained with T5's special ids).
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { expect, test } from 'vitest';
import { ModelType, PieceType, readSentencePieceModel } from './sentencepiece_model.js';

const SPIECE = new URL('../../assets/tiny-tokenizers/t5/spiece.model.gz', import.meta.url);

test('pieces, trainer and normalizer specs', () => {
  const model = readSentencePieceModel(gunzipSync(readFileSync(SPIECE)), 'spiece.model');
  expect(model.pieces).toHaveLength(1500);
  expect(model.pieces.slice(0, 4).map((p) => [p.piece, p.type])).toEqual([
    ['<pad>', PieceType.Control],
    ['</s>', PieceType.Control],
    ['<unk>', PieceType.Unknown],
    ['\u2581', PieceType.Normal],
  ]);
  // scores are float32 in the file, read exactly
  expect(Math.fround(model.pieces[3]!.score)).toBe(model.pieces[3]!.score);
  expect(model.trainerSpec).toMatchObject({ modelType: ModelType.Unigram, padId: 0, eosId: 1, unkId: 2, bosId: -1, byteFallback: false });
  expect(model.normalizerSpec).toMatchObject({ name: 'nmt_nfkc', addDummyPrefix: true, removeExtraWhitespaces: true });
  expect(Buffer.from(model.normalizerSpec.precompiledCharsmap, 'base64').length).toBeGreaterThan(1000);
});

test('not a sentencepiece model', () => {
  expect(() => readSentencePieceModel(Buffer.from('{"model": {}}'), 'x/spiece.model')).toThrow(/^x\/spiece.model is not a sentencepiece model/);
  expect(() => readSentencePieceModel(new Uint8Array(0), 'y/spiece.model')).toThrow('y/spiece.model holds no pieces: it is not a trained sentencepiece model');
});
