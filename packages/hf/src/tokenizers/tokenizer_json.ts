// tokenizer.json: the serialized tokenizers.Tokenizer (model, normalizer, pre-tokenizer,
// post-processor, decoder, added tokens). Only the parts this package reads are typed; the rest
// goes to tokenizers as it is.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { addedToken, type AddedTokenSpec } from './added_token.js';

export interface TokenizerJson {
  version?: string;
  truncation?: { direction?: string } | null;
  padding?: { direction?: string; pad_token?: string } | null;
  added_tokens?: { id: number; content: string; single_word?: boolean; lstrip?: boolean; rstrip?: boolean; normalized?: boolean; special?: boolean }[];
  normalizer?: Record<string, unknown> | null;
  pre_tokenizer?: Record<string, unknown> | null;
  post_processor?: Record<string, unknown> | null;
  decoder?: Record<string, unknown> | null;
  model: { type?: string; [key: string]: unknown };
}

/** `where` names the file in messages. */
export function parseTokenizerJson(text: string, where: string): TokenizerJson {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new DTorchError(ErrorCode.BadFile, `${where} is not valid JSON (${(error as Error).message})`);
  }
  const model = (json as { model?: unknown } | null)?.model;
  if (typeof json !== 'object' || json === null || typeof model !== 'object' || model === null) {
    throw new DTorchError(ErrorCode.BadFile, `${where} has no "model": it is not a tokenizer.json written by tokenizers`);
  }
  return json as TokenizerJson;
}

/** The file's added tokens with their ids, sorted by id. */
export function addedTokensOf(json: TokenizerJson): { id: number; token: AddedTokenSpec }[] {
  return (json.added_tokens ?? [])
    .map((t) => ({
      id: t.id,
      token: addedToken(t.content, { special: t.special ?? false, singleWord: t.single_word, lstrip: t.lstrip, rstrip: t.rstrip, normalized: t.normalized }),
    }))
    .sort((a, b) => a.id - b.id);
}

/** tokenizers writes directions "Left" / "Right"; transformers speaks of 'left' / 'right'. */
export function sideOf(direction: string | undefined): 'left' | 'right' | undefined {
  if (direction === undefined) return undefined;
  return direction.toLowerCase() === 'left' ? 'left' : 'right';
}
