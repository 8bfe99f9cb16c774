// AddedToken: a token matched in the text before the model runs (special tokens, T5's sentinels),
// with the flags of tokenizers' AddedToken. Configs write one as a string or as an object
// ({content, lstrip, rstrip, normalized, single_word, special}; transformers v4 adds "__type").
import { DTorchError, ErrorCode, describeValue } from '@dtorch/common';

/** An added token with tokenizers' AddedToken flags, camelCase. */
export interface AddedTokenSpec {
  /** The token's text. */
  readonly content: string;
  /** Matched only as a whole word (single_word). */
  readonly singleWord: boolean;
  /** Also takes the whitespace on its left (lstrip). */
  readonly lstrip: boolean;
  /** Also takes the whitespace on its right (rstrip). */
  readonly rstrip: boolean;
  /** Matched in the normalized text (true) or in the text as given (false). */
  readonly normalized: boolean;
  /** Dropped by decode({ skipSpecialTokens: true }). */
  readonly special: boolean;
}

const FLAG_NAMES = ['single_word', 'lstrip', 'rstrip', 'normalized', 'special'] as const;

/**
 * A config value as transformers reads it: a string is a special token; an object is
 * AddedToken(**object), whose "special" defaults to `special`. As in tokenizers, "normalized"
 * defaults to the opposite of "special".
 */
export function parseAddedToken(where: string, value: unknown, special: boolean): AddedTokenSpec {
  if (typeof value === 'string') return addedToken(value, { special: true });
  if (typeof value !== 'object' || value === null || Array.isArray(value) || typeof (value as { content?: unknown }).content !== 'string') {
    throw new DTorchError(
      ErrorCode.BadConfig,
      `${where}: expected a token string or an object {"content": "...", ...} but found ${describeValue(value)}`,
    );
  }
  const object = value as Record<string, unknown>;
  for (const flag of FLAG_NAMES) {
    if (object[flag] !== undefined && typeof object[flag] !== 'boolean') {
      throw new DTorchError(ErrorCode.BadConfig, `${where}.${flag}: expected true or false but found ${describeValue(object[flag])}`);
    }
  }
  const flags = object as { content: string; single_word?: boolean; lstrip?: boolean; rstrip?: boolean; normalized?: boolean; special?: boolean };
  return addedToken(flags.content, {
    special: flags.special ?? special,
    singleWord: flags.single_word,
    lstrip: flags.lstrip,
    rstrip: flags.rstrip,
    normalized: flags.normalized,
  });
}

/** An AddedTokenSpec of `content`: flags false unless given, `normalized` the opposite of `special`, as in tokenizers. */
export function addedToken(content: string, flags: Partial<AddedTokenSpec> & { special: boolean }): AddedTokenSpec {
  return {
    content,
    singleWord: flags.singleWord ?? false,
    lstrip: flags.lstrip ?? false,
    rstrip: flags.rstrip ?? false,
    normalized: flags.normalized ?? !flags.special,
    special: flags.special,
  };
}

/** Equal as tokenizers compares them: content and every flag. */
export function sameAddedToken(a: AddedTokenSpec, b: AddedTokenSpec): boolean {
  return (
    a.content === b.content &&
    a.singleWord === b.singleWord &&
    a.lstrip === b.lstrip &&
    a.rstrip === b.rstrip &&
    a.normalized === b.normalized &&
    a.special === b.special
  );
}
