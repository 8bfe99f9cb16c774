// TokenizerClass: a tokenizer class transformers builds from its own code rather than from
// tokenizer.json. Its __init__ (v5: models/<name>/tokenization_<name>.py) sets the normalizer,
// pre-tokenizer, decoder and post-processor, and takes only the vocabulary from tokenizer.json, or
// from the slow files (vocab.json + merges.txt, spiece.model) where there is no tokenizer.json.
import type { Model, Processor, Tokenizer } from 'tokenizers';
import type { AddedTokenSpec } from './added_token.js';
import type { TokenizerConfig } from './tokenizer_config.js';
import type { TokenizerJson } from './tokenizer_json.js';

/** A backend to load: its JSON, and a model to put in place of the JSON's once loaded. */
export interface Backend {
  /** The tokenizer.json to load. */
  readonly json: TokenizerJson;
  /**
   * Given where the model holds floats (Unigram scores): tokenizers' JSON reader may land 1 ulp
   * off a float, and transformers hands the scores to the model directly.
   */
  readonly model?: Model;
}

/** A tokenizer class built from transformers' code (clipTokenizer, t5Tokenizer). */
export interface TokenizerClass {
  /** transformers' class name, "CLIPTokenizer" */
  readonly name: string;
  /** The special tokens its __init__ defaults to, by name ("eos_token"). */
  readonly specialTokenDefaults: Readonly<Record<string, string>>;
  /** The files a folder without tokenizer.json needs. */
  readonly slowFiles: readonly string[];
  /** The backend (no added tokens, no post-processor) from a tokenizer.json's vocabulary. */
  fromTokenizerJson(json: TokenizerJson, named: ReadonlyMap<string, AddedTokenSpec>, where: string): Backend;
  /**
   * The backend from the slow files (their contents, in slowFiles order; `where` their names), and
   * the extra special tokens the files themselves bring.
   */
  fromSlowFiles(
    files: readonly Uint8Array[],
    config: TokenizerConfig,
    named: ReadonlyMap<string, AddedTokenSpec>,
    where: readonly string[],
  ): Backend & { readonly extraSpecialTokens: AddedTokenSpec[] };
  /** The extra special tokens the class makes when the config lists none. */
  defaultExtraSpecialTokens(config: TokenizerConfig): AddedTokenSpec[];
  /** The post-processor, once the special tokens have their ids in `backend`. */
  postProcessor(backend: Tokenizer, named: ReadonlyMap<string, AddedTokenSpec>): Processor;
  /** What the class does to decoded text after the backend's decoder, when anything. */
  cleanDecoded?(text: string): string;
}
