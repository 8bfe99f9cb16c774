// AutoTokenizer on small folders written here: the tokenizer.json of another class used as it is,
// subfolders, and every bad input refused with a DTorchError saying what to fix.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isDTorchError } from '@dtorch/common';
import { AutoTokenizer, type PreTrainedTokenizer } from './index.js';

/** A WordLevel tokenizer.json: a class transformers loads from the file as it is. */
const WORD_LEVEL = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [{ id: 1, content: '[UNK]', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
  normalizer: { type: 'Lowercase' },
  pre_tokenizer: { type: 'Whitespace' },
  post_processor: {
    type: 'TemplateProcessing',
    single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 0 } }],
    special_tokens: { '[SEP]': { id: '[SEP]', ids: [4], tokens: ['[SEP]'] } },
  },
  decoder: null,
  model: { type: 'WordLevel', vocab: { '[PAD]': 0, '[UNK]': 1, hello: 2, world: 3, '[SEP]': 4 }, unk_token: '[UNK]' },
};

let root: string;
const folder = (name: string, files: Record<string, unknown>) => {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return dir;
};

/** The DTorchError `work` throws (code and message), or a failure when it throws nothing or another error. */
async function failure(work: () => unknown): Promise<{ code: string; message: string }> {
  try {
    await work();
  } catch (error) {
    if (isDTorchError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a DTorchError');
}

let words: PreTrainedTokenizer;
let noLimits: PreTrainedTokenizer;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'dtorch-auto-tokenizer-'));
  const config = { tokenizer_class: 'PreTrainedTokenizerFast', pad_token: '[PAD]', eos_token: '[SEP]', unk_token: '[UNK]', model_max_length: 6 };
  words = await AutoTokenizer.fromPretrained(folder('repo', { 'tokenizer/tokenizer.json': WORD_LEVEL, 'tokenizer/tokenizer_config.json': config }), { subfolder: 'tokenizer' });
  noLimits = await AutoTokenizer.fromPretrained(folder('bare', { 'tokenizer.json': WORD_LEVEL }));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('another class: tokenizer.json as it is', () => {
  test('ids, padding, truncation and special tokens', async () => {
    expect(await words.encode('Hello world')).toEqual({ inputIds: [[2, 3, 4]], attentionMask: [[1, 1, 1]] });
    expect(await words.encode(['hello', 'hello world world world world world'], { padding: 'longest', truncation: true })).toEqual({
      inputIds: [
        [2, 4, 0, 0, 0, 0],
        [2, 3, 3, 3, 3, 4],
      ],
      attentionMask: [
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1],
      ],
    });
    expect(await words.encode([])).toEqual({ inputIds: [], attentionMask: [] });
    expect([words.padToken, words.padTokenId, words.eosTokenId, words.bosTokenId, words.modelMaxLength, words.vocabSize]).toEqual(['[PAD]', 0, 4, undefined, 6, 5]);
    // the config's pad and eos tokens became special added tokens, as transformers makes them
    expect(await words.decode([2, 4, 0, 0], { skipSpecialTokens: true })).toBe('hello');
    expect(await words.decode(new Int32Array([2, 3, 4]))).toBe('hello world [SEP]');
    expect(await words.batchDecode([[2], [3, 3]])).toEqual(['hello', 'world world']);
  });

  test('without tokenizer_config.json: no pad token, no model_max_length', async () => {
    expect(noLimits.padToken).toBeUndefined();
    expect(noLimits.modelMaxLength).toBe(1e30);
    expect(await noLimits.encode('hello world', { maxLength: 2 })).toEqual({ inputIds: [[2, 4]], attentionMask: [[1, 1]] });
  });
});

describe('bad input is a DTorchError saying what to fix', () => {
  test('text', async () => {
    expect(await failure(() => words.encode(3 as never))).toEqual({ code: 'INVALID_ARGUMENT', message: 'Expected a string or an array of strings for text but received 3 of type number' });
    expect((await failure(() => words.encode(['a', null] as never))).message).toBe('Expected a string or an array of strings for text but text[1] is null of type null');
  });

  test('encode options', async () => {
    const message = async (options: unknown) => (await failure(() => words.encode('hello', options as never))).message;
    expect(await message({ max_length: 4 })).toBe('Unknown option "max_length" in encode options (did you mean maxLength? options are camelCase); the options are padding, maxLength, truncation, addSpecialTokens');
    expect(await message({ maxLength: 0 })).toBe('Expected positive integer for maxLength but received 0 of type number');
    expect(await message({ maxLength: 2.5 })).toBe('Expected positive integer for maxLength but received 2.5 of type number');
    expect(await message({ maxLength: '8' })).toBe('Expected positive integer for maxLength but received "8" of type string');
    expect(await message({ padding: 'max' })).toBe('Expected false, \'longest\' (or true) or \'max_length\' for padding but received "max" of type string');
    expect(await message({ truncation: 'yes' })).toBe('Expected true or false for truncation but received "yes" of type string');
    expect(await message({ addSpecialTokens: 1 })).toBe('Expected boolean for addSpecialTokens but received 1 of type number');
    expect(await message(5)).toBe('Expected options object for encode options but received 5 of type number');
  });

  test('padding or truncation the tokenizer cannot do', async () => {
    expect((await failure(() => noLimits.encode('hello', { padding: 'max_length' }))).message).toMatch(/^padding: 'max_length' needs a length, and .*bare has no model_max_length in its tokenizer_config.json: pass maxLength$/);
    expect((await failure(() => noLimits.encode('hello', { truncation: true }))).message).toMatch(/^truncation needs a length, .*: pass maxLength$/);
    expect((await failure(() => noLimits.encode('hello', { padding: 'longest' }))).message).toMatch(/^padding needs a pad token, and .*bare has none/);
  });

  test('decode', async () => {
    expect(await failure(() => words.decode('2 3' as never))).toEqual({ code: 'INVALID_ARGUMENT', message: 'Expected an array of token ids for ids but received "2 3" of type string' });
    expect((await failure(() => words.decode([2, -1]))).message).toBe('Expected token ids from 0 to 4 (this tokenizer\'s vocabulary) for ids but ids[1] is -1');
    expect((await failure(() => words.decode([5]))).message).toBe('Expected token ids from 0 to 4 (this tokenizer\'s vocabulary) for ids but ids[0] is 5');
    expect((await failure(() => words.batchDecode([[2], [1.5]]))).message).toBe('Expected token ids from 0 to 4 (this tokenizer\'s vocabulary) for ids[1] but ids[1][0] is 1.5');
    expect((await failure(() => words.decode([2], { skip_special_tokens: true } as never))).message).toMatch(/^Unknown option "skip_special_tokens" in decode options \(did you mean skipSpecialTokens\?/);
    expect((await failure(() => words.decode([2], { skipSpecialTokens: 'yes' } as never))).message).toBe('Expected boolean for skipSpecialTokens but received "yes" of type string');
  });

  test('fromPretrained options and sources', async () => {
    const dir = join(root, 'repo');
    expect((await failure(() => AutoTokenizer.fromPretrained(dir, { sub_folder: 'tokenizer' } as never))).message).toBe(
      'Unknown option "sub_folder" in AutoTokenizer.fromPretrained options; the options are revision, cacheDir, localFilesOnly, token, hubUrl, onProgress, subfolder',
    );
    expect((await failure(() => AutoTokenizer.fromPretrained(dir, { subfolder: 2 } as never))).message).toBe('Expected string for AutoTokenizer.fromPretrained subfolder but received 2 of type number');
    expect((await failure(() => AutoTokenizer.fromPretrained(dir, { localFilesOnly: 'yes' } as never))).message).toBe('Expected boolean for AutoTokenizer.fromPretrained localFilesOnly but received "yes" of type string');
    expect((await failure(() => AutoTokenizer.fromPretrained(42 as never))).code).toBe('INVALID_ARGUMENT');
  });

  test('a folder without tokenizer.json whose slow files cannot be converted: NOT_FOUND naming them', async () => {
    const gpt2 = folder('gpt2', { 'vocab.json': { a: 0 }, 'merges.txt': '#version: 0.2\n', 'tokenizer_config.json': { tokenizer_class: 'GPT2Tokenizer' } });
    expect(await failure(() => AutoTokenizer.fromPretrained(gpt2))).toEqual({
      code: 'NOT_FOUND',
      message:
        `${gpt2} has no tokenizer.json, and the slow tokenizer files merges.txt, vocab.json; its tokenizer_config.json names GPT2Tokenizer, ` +
        'and only CLIPTokenizer (vocab.json + merges.txt) or T5Tokenizer (spiece.model) can be converted here. ' +
        'Give a folder with tokenizer.json (Python: AutoTokenizer.from_pretrained(path).save_pretrained(path) writes it)',
    });
    const clip = folder('clip-no-merges', { 'tokenizer/vocab.json': { a: 0 }, 'tokenizer/tokenizer_config.json': { tokenizer_class: 'CLIPTokenizer' } });
    expect((await failure(() => AutoTokenizer.fromPretrained(clip, { subfolder: 'tokenizer' }))).message).toBe(
      `${clip} (subfolder tokenizer) has no tokenizer.json, and the slow tokenizer files vocab.json; CLIPTokenizer needs vocab.json + merges.txt. ` +
        'Give a folder with tokenizer.json (Python: AutoTokenizer.from_pretrained(path).save_pretrained(path) writes it)',
    );
    const empty = folder('empty', {});
    expect((await failure(() => AutoTokenizer.fromPretrained(empty))).message).toMatch(/has no tokenizer.json, and no slow tokenizer files \(it holds nothing\); it has no tokenizer_config.json to name the tokenizer class/);
  });

  test('bad files: BAD_FILE or BAD_CONFIG naming the file', async () => {
    const notJson = folder('not-json', { 'tokenizer.json': '{"model": ' });
    expect(await failure(() => AutoTokenizer.fromPretrained(notJson))).toMatchObject({ code: 'BAD_FILE', message: expect.stringMatching(/not-json\/tokenizer.json is not valid JSON/) });
    const noModel = folder('no-model', { 'tokenizer.json': { version: '1.0' } });
    expect((await failure(() => AutoTokenizer.fromPretrained(noModel))).message).toMatch(/no-model\/tokenizer.json has no "model"/);
    const badModel = folder('bad-model', { 'tokenizer.json': { ...WORD_LEVEL, model: { type: 'WordLevel', vocab: 3 } } });
    expect(await failure(() => AutoTokenizer.fromPretrained(badModel))).toMatchObject({ code: 'BAD_FILE', message: expect.stringMatching(/^tokenizers could not load .*bad-model\/tokenizer.json: /) });
    const side = folder('bad-side', { 'tokenizer.json': WORD_LEVEL, 'tokenizer_config.json': { padding_side: 'middle' } });
    expect(await failure(() => AutoTokenizer.fromPretrained(side))).toEqual({ code: 'BAD_CONFIG', message: `${side}/tokenizer_config.json "padding_side": expected "left" or "right" but found "middle"` });
    const length = folder('bad-length', { 'tokenizer.json': WORD_LEVEL, 'tokenizer_config.json': { model_max_length: -1 } });
    expect((await failure(() => AutoTokenizer.fromPretrained(length))).message).toBe(`${length}/tokenizer_config.json "model_max_length": expected a positive integer but found -1`);
    const token = folder('bad-token', { 'tokenizer.json': WORD_LEVEL, 'tokenizer_config.json': { pad_token: 7 } });
    expect((await failure(() => AutoTokenizer.fromPretrained(token))).message).toBe(`${token}/tokenizer_config.json "pad_token": expected a token string or an object {"content": "...", ...} but found 7`);
    const spiece = folder('bad-spiece', { 'spiece.model': 'not a protobuf at all', 'tokenizer_config.json': { tokenizer_class: 'T5Tokenizer' } });
    expect(await failure(() => AutoTokenizer.fromPretrained(spiece))).toMatchObject({ code: 'BAD_FILE', message: expect.stringMatching(/bad-spiece\/spiece.model is not a sentencepiece model/) });
    const merges = folder('bad-merges', { 'vocab.json': { a: 0 }, 'merges.txt': '#version: 0.2\na b c\n', 'tokenizer_config.json': { tokenizer_class: 'CLIPTokenizerFast' } });
    expect((await failure(() => AutoTokenizer.fromPretrained(merges))).message).toBe(`${merges}/merges.txt line 2: expected a merge "a b" but found "a b c"`);
  });
});
