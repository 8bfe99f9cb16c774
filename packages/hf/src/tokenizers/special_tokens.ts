// The added tokens transformers gives a tokenizer once its backend is built
// (TokenizersBackend.__init__): the config's added_tokens_decoder entries the backend lacks, then
// every named special token and extra special token whose text the backend does not know as an
// added token yet. They go through tokenizers' add_tokens in this order, which keeps the flags of
// the last of two tokens with the same text.
import { addedToken, sameAddedToken, type AddedTokenSpec } from './added_token.js';
import type { BackendTokenizer } from './backend_tokenizer.js';
import { SPECIAL_TOKEN_NAMES, type TokenizerConfig } from './tokenizer_config.js';

/**
 * The named special tokens: the config's, else the class's defaults (`defaults`, as the
 * tokenizer class's __init__ has them), else the pad token a tokenizer.json's padding names.
 * All are special, as transformers makes them.
 */
export function namedSpecialTokens(
  config: TokenizerConfig,
  defaults: Readonly<Record<string, string>>,
  jsonPadToken: string | undefined,
): Map<string, AddedTokenSpec> {
  const named = new Map<string, AddedTokenSpec>();
  for (const name of SPECIAL_TOKEN_NAMES) {
    const given = config.specialTokens.get(name);
    const fallback = defaults[name] ?? (name === 'pad_token' ? jsonPadToken : undefined);
    if (given !== undefined) named.set(name, { ...given, special: true });
    else if (fallback !== undefined) named.set(name, addedToken(fallback, { special: true }));
  }
  for (const [name, token] of config.specialTokens) if (!named.has(name)) named.set(name, { ...token, special: true });
  return named;
}

/**
 * The tokens to add, in order, to a backend whose added tokens are `existing`: `decoder` are the
 * config's added_tokens_decoder (in the older layout, tokenizer.json's added tokens), `extra` the
 * extra special tokens (the config's list, or the ones the tokenizer class makes).
 */
export function specialTokensToAdd(
  decoder: readonly AddedTokenSpec[],
  named: ReadonlyMap<string, AddedTokenSpec>,
  extra: readonly AddedTokenSpec[],
  existing: readonly AddedTokenSpec[],
): AddedTokenSpec[] {
  const namedContents = new Set([...named.values()].map((t) => t.content));
  const asNamed = (t: AddedTokenSpec) => (!t.special && namedContents.has(t.content) ? { ...t, special: true } : t);
  const toAdd = decoder.filter((t) => !existing.some((e) => sameAddedToken(e, t)));
  const known = new Set([...existing, ...toAdd].map((t) => t.content));
  for (const token of [...named.values(), ...extra]) {
    if (known.has(token.content) || toAdd.some((t) => sameAddedToken(t, token))) continue;
    toAdd.push(token);
  }
  return toAdd.map(asNamed);
}

/** The id of a token, else of the unknown token, as transformers' convert_tokens_to_ids gives it. */
export function tokenIdOf(backend: Pick<BackendTokenizer, 'tokenToId'>, token: string, named: ReadonlyMap<string, AddedTokenSpec>): number | undefined {
  const id = backend.tokenToId(token);
  if (id !== null) return id;
  const unk = named.get('unk_token');
  return (unk !== undefined ? backend.tokenToId(unk.content) : null) ?? undefined;
}
