// The backend tokenizer as @dtorch/hf hands it out and calls it: the part of tokenizers' Tokenizer
// (HF's Rust core) that DTorch uses, declared here so that tokenizers' own declarations, which do
// not compile under `skipLibCheck: false`, stay out of this package's public ones. tokenizers'
// Tokenizer is one: AutoTokenizer assigns it, so the compiler checks that it still fits.
import type { Side } from './tokenizer_config.js';

/** One encoded text, as the backend gives it. */
export interface BackendEncoding {
  /** The token ids. */
  getIds(): number[];
  /** 1 for a real token, 0 for padding. */
  getAttentionMask(): number[];
}

/** The padding the backend applies to a batch (tokenizers' PaddingOptions). */
export interface BackendPadding {
  /** Pad to this length; else to the batch's longest. */
  maxLength?: number;
  /** The side padding goes on. */
  direction?: Side;
  /** The padding token's id. */
  padId?: number;
  /** The padding token's type id. */
  padTypeId?: number;
  /** The padding token. */
  padToken?: string;
}

/**
 * A tokenizers.Tokenizer, as `PreTrainedTokenizer.backendTokenizer` exposes it (transformers'
 * backend_tokenizer): the calls DTorch makes. The object is tokenizers' own; a program that needs
 * more of it imports tokenizers' Tokenizer type and casts.
 */
export interface BackendTokenizer {
  /** The encodings of `texts`, special tokens added unless `addSpecialTokens` is false. */
  encodeBatch(texts: string[], options?: { addSpecialTokens?: boolean }): Promise<BackendEncoding[]>;
  /** The text of each row of ids. */
  decodeBatch(ids: number[][], skipSpecialTokens: boolean): Promise<string[]>;
  /** The vocabulary's size, with or without the added tokens. */
  getVocabSize(withAddedTokens?: boolean): number;
  /** A token's id, or null when the vocabulary lacks it. */
  tokenToId(token: string): number | null;
  /** An id's token, or null when the vocabulary lacks it. */
  idToToken(id: number): string | null;
  /** Truncate every encoding to `maxLength` ids from now on. */
  setTruncation(maxLength: number, options?: { direction?: Side; stride?: number }): void;
  /** Truncate no more. */
  disableTruncation(): void;
  /** Pad every batch from now on. */
  setPadding(options?: BackendPadding): void;
  /** Pad no more. */
  disablePadding(): void;
  /** Writes the tokenizer as a tokenizer.json to `path`. */
  save(path: string, pretty?: boolean): void;
}
