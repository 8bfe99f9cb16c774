// TokenizerConfig: what tokenizer_config.json and special_tokens_map.json say, read as
// transformers' from_pretrained reads them (tokenization_utils_base._from_pretrained): the special
// tokens map overrides the config's tokens only in configs without "added_tokens_decoder" (the
// older layout), and "additional_special_tokens" is the older name of "extra_special_tokens".
import { DTorchError, ErrorCode, describeValue } from '@dtorch/common';
import { parseAddedToken, type AddedTokenSpec } from './added_token.js';

/** transformers' VERY_LARGE_INTEGER (int(1e30)): the model_max_length of a config that gives none. */
export const VERY_LARGE_INTEGER = 1e30;
/** transformers' LARGE_INTEGER: a model_max_length above it means "no limit". */
export const LARGE_INTEGER = 1e20;

/** The named special tokens of transformers (SPECIAL_TOKENS_ATTRIBUTES), in its order. */
export const SPECIAL_TOKEN_NAMES = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/** Which end padding or truncation acts on (transformers' padding_side, truncation_side). */
export type Side = 'left' | 'right';

/** tokenizer_config.json with special_tokens_map.json, camelCase, as transformers reads them. */
export interface TokenizerConfig {
  /** The class transformers builds (tokenizer_class, "Fast" suffix dropped), when the config names one. */
  readonly tokenizerClass: string | undefined;
  /** model_max_length (transformers' 1e30 when absent). */
  readonly modelMaxLength: number;
  /** padding_side, when given. */
  readonly paddingSide: Side | undefined;
  /** truncation_side, when given. */
  readonly truncationSide: Side | undefined;
  /** clean_up_tokenization_spaces: decode()'s default. */
  readonly cleanUpTokenizationSpaces: boolean;
  /** clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output */
  readonly cleanUpBpe: boolean;
  /** T5's number of sentinel tokens <extra_id_N> (extra_ids, default 100). */
  readonly extraIds: number;
  /** bos_token, eos_token, ... then model-specific *_token keys, as given (absent ones left out). */
  readonly specialTokens: ReadonlyMap<string, AddedTokenSpec>;
  /** extra_special_tokens (additional_special_tokens), when the files give a list. */
  readonly extraSpecialTokens: readonly AddedTokenSpec[] | undefined;
  /** added_tokens_decoder, sorted by id; undefined in configs without one (the older layout). */
  readonly addedTokensDecoder: readonly { readonly id: number; readonly token: AddedTokenSpec }[] | undefined;
}

type Json = Record<string, unknown>;

/** `config` and `specialTokensMap` are the parsed files (undefined when absent); `where` names them in messages. */
export function readTokenizerConfig(config: unknown, specialTokensMap: unknown, where: { config: string; specialTokensMap: string }): TokenizerConfig {
  const cfg = checkObject(where.config, config ?? {});
  const map = specialTokensMap === undefined ? undefined : checkObject(where.specialTokensMap, specialTokensMap);
  const at = (key: string) => `${where.config} "${key}"`;

  const specialTokens = new Map<string, AddedTokenSpec>();
  // config tokens: an object is an AddedToken whose "special" defaults to false (made special later)
  for (const name of SPECIAL_TOKEN_NAMES) {
    if (cfg[name] !== undefined && cfg[name] !== null) specialTokens.set(name, parseAddedToken(at(name), cfg[name], false));
  }
  // model-specific tokens (image_token, ...): transformers takes only strings here
  for (const [key, value] of Object.entries(cfg)) {
    if (key.endsWith('_token') && !specialTokens.has(key) && typeof value === 'string') specialTokens.set(key, parseAddedToken(at(key), value, true));
  }

  let extra = tokenList(at('extra_special_tokens'), cfg.extra_special_tokens, false);
  if (extra === undefined || extra.length === 0) extra = tokenList(at('additional_special_tokens'), cfg.additional_special_tokens, false) ?? extra;
  if (isObject(cfg.extra_special_tokens)) {
    for (const [key, value] of Object.entries(cfg.extra_special_tokens)) specialTokens.set(key, parseAddedToken(`${at('extra_special_tokens')}.${key}`, value, true));
  }

  const hasDecoder = cfg.added_tokens_decoder !== undefined;
  if (map !== undefined && !hasDecoder) {
    const mapAt = (key: string) => `${where.specialTokensMap} "${key}"`;
    for (const [key, value] of Object.entries(map)) {
      if (value === null || value === undefined) continue;
      // transformers makes every token of this file special, whatever its "special" says
      const special = (token: unknown) => (isObject(token) ? { ...token, special: true } : token);
      if (key === 'extra_special_tokens' || key === 'additional_special_tokens') {
        const listed = tokenList(mapAt(key), Array.isArray(value) ? value.map(special) : value, true) ?? [];
        if (key === 'additional_special_tokens' && extra !== undefined) continue; // the config's list wins
        extra = [...(extra ?? []), ...listed.filter((t) => !(extra ?? []).some((e) => e.content === t.content))];
      } else if (key.endsWith('_token')) {
        specialTokens.set(key, parseAddedToken(mapAt(key), special(value), true));
      }
    }
  }

  return {
    tokenizerClass: optionalString(at('tokenizer_class'), cfg.tokenizer_class)?.replace(/Fast$/, ''),
    modelMaxLength: modelMaxLength(at('model_max_length'), cfg.model_max_length ?? cfg.max_len),
    paddingSide: side(at('padding_side'), cfg.padding_side),
    truncationSide: side(at('truncation_side'), cfg.truncation_side),
    cleanUpTokenizationSpaces: optionalBoolean(at('clean_up_tokenization_spaces'), cfg.clean_up_tokenization_spaces) ?? false,
    cleanUpBpe: optionalBoolean(at('clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output'), cfg.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output) ?? false,
    extraIds: extraIds(at('extra_ids'), cfg.extra_ids),
    specialTokens,
    extraSpecialTokens: extra,
    addedTokensDecoder: addedTokensDecoder(at('added_tokens_decoder'), cfg.added_tokens_decoder),
  };
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkObject(where: string, value: unknown): Json {
  if (!isObject(value)) throw new DTorchError(ErrorCode.BadConfig, `${where}: expected a JSON object but found ${describeValue(value)}`);
  return value;
}

function badValue(where: string, expected: string, value: unknown): DTorchError {
  return new DTorchError(ErrorCode.BadConfig, `${where}: expected ${expected} but found ${describeValue(value)}`);
}

function tokenList(where: string, value: unknown, special: boolean): AddedTokenSpec[] | undefined {
  if (value === undefined || value === null || isObject(value)) return undefined;
  if (!Array.isArray(value)) throw badValue(where, 'a list of tokens', value);
  return value.map((token, i) => parseAddedToken(`${where}[${i}]`, token, special));
}

function optionalString(where: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw badValue(where, 'a string', value);
  return value;
}

function optionalBoolean(where: string, value: unknown): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw badValue(where, 'true or false', value);
  return value;
}

function modelMaxLength(where: string, value: unknown): number {
  if (value === undefined || value === null) return VERY_LARGE_INTEGER;
  if (typeof value !== 'number' || !(value >= 1)) throw badValue(where, 'a positive integer', value);
  return value;
}

function side(where: string, value: unknown): Side | undefined {
  if (value === undefined || value === null) return undefined;
  if (value !== 'left' && value !== 'right') throw badValue(where, '"left" or "right"', value);
  return value;
}

function extraIds(where: string, value: unknown): number {
  if (value === undefined || value === null) return 100;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw badValue(where, 'a non-negative integer', value);
  return value;
}

function addedTokensDecoder(where: string, value: unknown): { id: number; token: AddedTokenSpec }[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw badValue(where, 'an object {"<id>": {"content": ...}}', value);
  return Object.entries(value)
    .map(([id, token]) => {
      if (!/^\d+$/.test(id)) throw badValue(`${where} key`, 'a token id (a non-negative integer)', id);
      return { id: Number(id), token: parseAddedToken(`${where}["${id}"]`, token, false) };
    })
    .sort((a, b) => a.id - b.id);
}
