// tokenizer.json: the serialized tokenizers.Tokenizer (model, normalizer, pre-tokenizer,
// post-processor, decoder, added tokens). Only the parts this package reads are typed; the rest
// goes to tokenizers as it is.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { addedToken, type AddedTokenSpec } from './added_token.js';

/** A tokenizer.json: the parts this package reads typed, the rest as JSON. */
export interface TokenizerJson {
  /** The format version ("1.0"). */
  version?: string;
  /** The saved truncation settings; its direction is a default truncation side. */
  truncation?: { direction?: string } | null;
  /** The saved padding settings; its direction and pad_token are defaults. */
  padding?: { direction?: string; pad_token?: string } | null;
  /** The added tokens with their ids and flags. */
  added_tokens?: { id: number; content: string; single_word?: boolean; lstrip?: boolean; rstrip?: boolean; normalized?: boolean; special?: boolean }[];
  /** The normalizer, as tokenizers serializes it. */
  normalizer?: Record<string, unknown> | null;
  /** The pre-tokenizer, as tokenizers serializes it. */
  pre_tokenizer?: Record<string, unknown> | null;
  /** The post-processor (the special tokens around a sequence). */
  post_processor?: Record<string, unknown> | null;
  /** The decoder, as tokenizers serializes it. */
  decoder?: Record<string, unknown> | null;
  /** The model (BPE, Unigram, WordPiece, ...) with its vocabulary. */
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
