// PreTrainedTokenizer: text to token ids and back, as transformers' tokenizer(...) and decode()
// give them. The work is tokenizers' (HF's Rust core, the same as Python's); this class holds what
// transformers adds on top: the special tokens and lengths of tokenizer_config.json, the rules
// for padding and truncation, and the class's step after decoding.
import { DTorchError, ErrorCode, checkBoolean, describeValue, checkKnownOptions } from '@dtorch/common';
import type { AddedTokenSpec } from './added_token.js';
import type { BackendTokenizer } from './backend_tokenizer.js';
import { planEncode, type EncodeOptions, type EncodePlan } from './encode_options.js';
import { tokenIdOf } from './special_tokens.js';
import type { Side } from './tokenizer_config.js';

/** Always the batch form: one row per text, also for a single string. */
export interface BatchEncoding {
  /** The token ids of each text (transformers' input_ids). */
  inputIds: number[][];
  /** 1 for a real token, 0 for padding, per text (transformers' attention_mask). */
  attentionMask: number[][];
}

/** decode()'s and batchDecode()'s options, as transformers' decode arguments. */
export interface DecodeOptions {
  /** Leave out special tokens (padding, <|endoftext|>, </s>, ...); default false. */
  skipSpecialTokens?: boolean;
  /** Remove the spaces before punctuation a WordPiece-style decode leaves; default the config's clean_up_tokenization_spaces. */
  cleanUpTokenizationSpaces?: boolean;
}

/** What AutoTokenizer assembles; not for users to build. */
export interface TokenizerParts {
  /** The tokenizers.Tokenizer. */
  readonly backend: BackendTokenizer;
  /** The source and subfolder, for messages. */
  readonly description: string;
  /** PreTrainedTokenizer.tokenizerClass. */
  readonly tokenizerClass: string | undefined;
  /** PreTrainedTokenizer.modelMaxLength. */
  readonly modelMaxLength: number;
  /** PreTrainedTokenizer.paddingSide. */
  readonly paddingSide: Side;
  /** PreTrainedTokenizer.truncationSide. */
  readonly truncationSide: Side;
  /** The named special tokens by name ("pad_token"). */
  readonly specialTokens: ReadonlyMap<string, AddedTokenSpec>;
  /** decode()'s default for cleanUpTokenizationSpaces. */
  readonly cleanUpTokenizationSpaces: boolean;
  /** Clean up BPE output too (transformers skips it for BPE models unless told). */
  readonly cleanUpBpe: boolean;
  /** The model is BPE (its decode skips the spaces clean-up unless cleanUpBpe). */
  readonly isBpe: boolean;
  /** The class's step after decoding (TokenizerClass.cleanDecoded), if any. */
  readonly cleanDecoded: ((text: string) => string) | undefined;
}

const DECODE_OPTIONS = ['skipSpecialTokens', 'cleanUpTokenizationSpaces'] as const;

/**
 * A loaded tokenizer, as transformers' PreTrainedTokenizerFast: encode() and decode(), the
 * special tokens and the padding and truncation rules of tokenizer_config.json. Made by
 * AutoTokenizer.fromPretrained.
 */
export class PreTrainedTokenizer {
  /** The tokenizers.Tokenizer doing the work (transformers' backend_tokenizer), typed by the calls DTorch makes. */
  readonly backendTokenizer: BackendTokenizer;
  /** transformers' class name ("CLIPTokenizer"), when tokenizer_config.json gives one. */
  readonly tokenizerClass: string | undefined;
  /** model_max_length (transformers' 1e30 when the config gives none). */
  readonly modelMaxLength: number;
  /** The side padding goes on (padding_side; default 'right'). */
  readonly paddingSide: Side;
  /** The side truncation cuts from (truncation_side; default 'right'). */
  readonly truncationSide: Side;
  /** The padding token (pad_token), if the tokenizer has one. */
  readonly padToken: string | undefined;
  /** padToken's id. */
  readonly padTokenId: number | undefined;
  /** The end-of-sequence token (eos_token), if any. */
  readonly eosToken: string | undefined;
  /** eosToken's id. */
  readonly eosTokenId: number | undefined;
  /** The beginning-of-sequence token (bos_token), if any. */
  readonly bosToken: string | undefined;
  /** bosToken's id. */
  readonly bosTokenId: number | undefined;
  /** The unknown-word token (unk_token), if any. */
  readonly unkToken: string | undefined;
  /** unkToken's id. */
  readonly unkTokenId: number | undefined;
  /** The model's vocabulary, added tokens not counted (transformers' vocab_size). */
  readonly vocabSize: number;
  readonly #parts: TokenizerParts;
  readonly #size: number;
  // padding and truncation are settings of the backend: calls take turns so none sees another's
  #turn: Promise<unknown> = Promise.resolve();

  /** @internal AutoTokenizer.fromPretrained builds tokenizers. */
  constructor(parts: TokenizerParts) {
    this.#parts = parts;
    this.backendTokenizer = parts.backend;
    this.tokenizerClass = parts.tokenizerClass;
    this.modelMaxLength = parts.modelMaxLength;
    this.paddingSide = parts.paddingSide;
    this.truncationSide = parts.truncationSide;
    const token = (name: string) => parts.specialTokens.get(name)?.content;
    const id = (name: string) => {
      const content = token(name);
      return content === undefined ? undefined : tokenIdOf(parts.backend, content, parts.specialTokens);
    };
    this.padToken = token('pad_token');
    this.padTokenId = id('pad_token');
    this.eosToken = token('eos_token');
    this.eosTokenId = id('eos_token');
    this.bosToken = token('bos_token');
    this.bosTokenId = id('bos_token');
    this.unkToken = token('unk_token');
    this.unkTokenId = id('unk_token');
    this.vocabSize = parts.backend.getVocabSize(false);
    this.#size = parts.backend.getVocabSize(true);
  }

  /** Token ids of `text` (one string or several), as transformers' tokenizer(text, ...) gives them. */
  async encode(text: string | readonly string[], options?: EncodeOptions): Promise<BatchEncoding> {
    const texts = checkTexts(text);
    const plan = planEncode(options, { modelMaxLength: this.modelMaxLength, padToken: this.padToken, description: this.#parts.description });
    return this.#inTurn(async () => {
      this.#configure(plan);
      const encodings = await this.backendTokenizer.encodeBatch(texts, { addSpecialTokens: plan.addSpecialTokens });
      return { inputIds: encodings.map((e) => e.getIds()), attentionMask: encodings.map((e) => e.getAttentionMask()) };
    });
  }

  /** The text of one sequence of ids, as transformers' decode(ids, ...) gives it. */
  async decode(ids: ArrayLike<number>, options?: DecodeOptions): Promise<string> {
    const [text] = await this.#decode([this.#checkIds('ids', ids)], options);
    return text!;
  }

  /** decode() of each row, as transformers' batch_decode. */
  async batchDecode(ids: readonly ArrayLike<number>[], options?: DecodeOptions): Promise<string[]> {
    if (!Array.isArray(ids)) throw new DTorchError(ErrorCode.InvalidArgument, `Expected an array of id sequences for ids but received ${describeValue(ids)}`);
    return this.#decode(ids.map((row, i) => this.#checkIds(`ids[${i}]`, row)), options);
  }

  async #decode(rows: number[][], value: DecodeOptions | undefined): Promise<string[]> {
    const options = checkKnownOptions<DecodeOptions>('decode options', value, DECODE_OPTIONS);
    const skip = options.skipSpecialTokens === undefined ? false : checkBoolean('skipSpecialTokens', options.skipSpecialTokens);
    const cleanUp = options.cleanUpTokenizationSpaces === undefined ? this.#parts.cleanUpTokenizationSpaces : checkBoolean('cleanUpTokenizationSpaces', options.cleanUpTokenizationSpaces);
    const texts = await this.backendTokenizer.decodeBatch(rows, skip);
    const clean = this.#parts.cleanDecoded;
    // as transformers: the spaces clean-up is for WordPiece output and skipped for BPE models
    const cleanSpaces = cleanUp && (!this.#parts.isBpe || this.#parts.cleanUpBpe);
    return texts.map((t) => {
      const text = clean ? clean(t) : t;
      return cleanSpaces ? cleanUpTokenization(text) : text;
    });
  }

  #configure(plan: EncodePlan): void {
    const backend = this.backendTokenizer;
    if (plan.truncation) backend.setTruncation(plan.maxLength!, { direction: this.truncationSide, stride: 0 });
    else backend.disableTruncation();
    if (plan.padding === 'none') backend.disablePadding();
    else {
      backend.setPadding({
        maxLength: plan.padding === 'max_length' ? plan.maxLength : undefined,
        direction: this.paddingSide,
        padId: this.padTokenId ?? 0,
        padTypeId: 0,
        padToken: this.padToken!,
      });
    }
  }

  #inTurn<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#turn.then(work);
    this.#turn = result.catch(() => undefined);
    return result;
  }

  #checkIds(name: string, ids: unknown): number[] {
    const isArrayLike = Array.isArray(ids) || (ArrayBuffer.isView(ids) && !(ids instanceof DataView));
    if (!isArrayLike) throw new DTorchError(ErrorCode.InvalidArgument, `Expected an array of token ids for ${name} but received ${describeValue(ids)} of type ${typeof ids}`);
    const row = Array.from(ids as ArrayLike<number | bigint>, Number);
    const bad = row.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= this.#size);
    if (bad >= 0) {
      throw new DTorchError(
        ErrorCode.InvalidArgument,
        `Expected token ids from 0 to ${this.#size - 1} (this tokenizer's vocabulary) for ${name} but ${name}[${bad}] is ${describeValue((ids as ArrayLike<unknown>)[bad])}`,
      );
    }
    return row;
  }
}

function checkTexts(text: unknown): string[] {
  if (typeof text === 'string') return [text];
  if (!Array.isArray(text)) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected a string or an array of strings for text but received ${describeValue(text)} of type ${text === null ? 'null' : typeof text}`);
  }
  const bad = text.findIndex((t) => typeof t !== 'string');
  if (bad >= 0) {
    const value: unknown = text[bad];
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected a string or an array of strings for text but text[${bad}] is ${describeValue(value)} of type ${value === null ? 'null' : typeof value}`);
  }
  return text as string[];
}

/** transformers' clean_up_tokenization: spaces before punctuation and English contractions. */
function cleanUpTokenization(text: string): string {
  return text
    .replaceAll(' .', '.')
    .replaceAll(' ?', '?')
    .replaceAll(' !', '!')
    .replaceAll(' ,', ',')
    .replaceAll(" ' ", "'")
    .replaceAll(" n't", "n't")
    .replaceAll(" 'm", "'m")
    .replaceAll(" 's", "'s")
    .replaceAll(" 've", "'ve")
    .replaceAll(" 're", "'re");
}
