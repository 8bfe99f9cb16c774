// readTokenizerConfig: the special tokens as transformers' from_pretrained reads the two files.
import { expect, test } from 'vitest';
import { addedToken } from './added_token.js';
import { readTokenizerConfig } from './tokenizer_config.js';

const where = { config: 'tokenizer_config.json', specialTokensMap: 'special_tokens_map.json' };

test('defaults of a config that says nothing', () => {
  const config = readTokenizerConfig(undefined, undefined, where);
  expect(config).toMatchObject({ tokenizerClass: undefined, modelMaxLength: 1e30, paddingSide: undefined, cleanUpTokenizationSpaces: false, extraIds: 100 });
  expect(config.specialTokens.size).toBe(0);
  expect(config.extraSpecialTokens).toBeUndefined();
  expect(config.addedTokensDecoder).toBeUndefined();
});

test('the older layout: special_tokens_map.json overrides the config, and makes its tokens special', () => {
  const config = readTokenizerConfig(
    {
      tokenizer_class: 'CLIPTokenizerFast',
      pad_token: '<|endoftext|>',
      bos_token: { __type: 'AddedToken', content: '<|startoftext|>', normalized: true },
      additional_special_tokens: ['<a>'],
      image_token: '<image>',
    },
    { pad_token: { content: '!', normalized: false, special: false }, additional_special_tokens: ['<b>'] },
    where,
  );
  expect(config.tokenizerClass).toBe('CLIPTokenizer');
  expect(config.specialTokens.get('pad_token')).toEqual(addedToken('!', { special: true, normalized: false }));
  // a config object is AddedToken(**object): not special until transformers makes it so
  expect(config.specialTokens.get('bos_token')).toEqual(addedToken('<|startoftext|>', { special: false, normalized: true }));
  expect(config.specialTokens.get('image_token')).toEqual(addedToken('<image>', { special: true }));
  // the config's list wins over the map's additional_special_tokens
  expect(config.extraSpecialTokens?.map((t) => t.content)).toEqual(['<a>']);
});

test('with added_tokens_decoder the special tokens map is not read', () => {
  const config = readTokenizerConfig(
    { pad_token: '!', added_tokens_decoder: { '49407': { content: '<|endoftext|>', special: true, normalized: false }, '0': { content: '!', special: true } } },
    { pad_token: '<|endoftext|>', extra_special_tokens: ['<x>'] },
    where,
  );
  expect(config.specialTokens.get('pad_token')?.content).toBe('!');
  expect(config.extraSpecialTokens).toBeUndefined();
  expect(config.addedTokensDecoder?.map((d) => [d.id, d.token.content])).toEqual([
    [0, '!'],
    [49407, '<|endoftext|>'],
  ]);
});

test('bad values name the file and the key', () => {
  expect(() => readTokenizerConfig({ truncation_side: 'up' }, undefined, where)).toThrow('tokenizer_config.json "truncation_side": expected "left" or "right" but found "up"');
  expect(() => readTokenizerConfig({ extra_ids: -1 }, undefined, where)).toThrow('tokenizer_config.json "extra_ids": expected a non-negative integer but found -1');
  expect(() => readTokenizerConfig({ added_tokens_decoder: { x: { content: 'a' } } }, undefined, where)).toThrow('tokenizer_config.json "added_tokens_decoder" key: expected a token id');
  expect(() => readTokenizerConfig([], undefined, where)).toThrow('tokenizer_config.json: expected a JSON object but found []');
  expect(() => readTokenizerConfig({}, { pad_token: { content: 'x', lstrip: 'no' } }, where)).toThrow('special_tokens_map.json "pad_token".lstrip: expected true or false but found "no"');
});
