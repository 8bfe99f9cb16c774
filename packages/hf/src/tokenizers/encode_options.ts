// The options of encode() and the padding and truncation they come to, by the rules of
// transformers' tokenizer(...) call (_get_padding_truncation_strategies): maxLength alone turns
// truncation on; padding 'max_length' and truncation without maxLength use the model's maximum.
import { DTorchError, ErrorCode, checkBoolean, checkInteger, invalidParameter, checkKnownOptions } from '@dtorch/common';
import { LARGE_INTEGER } from './tokenizer_config.js';

/** encode()'s options: transformers' tokenizer(...) arguments, camelCase. */
export interface EncodeOptions {
  /**
   * false (default): no padding; 'longest' (or true): to the longest sequence of the batch;
   * 'max_length': to maxLength.
   */
  padding?: boolean | 'longest' | 'max_length' | 'do_not_pad';
  /** The length to pad or truncate to; modelMaxLength when padding is 'max_length' or truncation is on. */
  maxLength?: number;
  /**
   * Cut sequences to maxLength, special tokens included (the end-of-sequence token is kept).
   * Default: on when only maxLength is given, else off.
   */
  truncation?: boolean | 'longest_first' | 'only_first' | 'do_not_truncate';
  /** Add the model's special tokens (CLIP's <|startoftext|> ... <|endoftext|>, T5's </s>); default true. */
  addSpecialTokens?: boolean;
}

/** What encode() sets on the backend: the padding and truncation the options come to. */
export interface EncodePlan {
  /** How to pad: not at all, to the batch's longest, or to maxLength. */
  readonly padding: 'none' | 'longest' | 'max_length';
  /** Truncate to maxLength. */
  readonly truncation: boolean;
  /** Set when padding is 'max_length' or truncation is on. */
  readonly maxLength: number | undefined;
  /** Add the model's special tokens. */
  readonly addSpecialTokens: boolean;
}

const OPTION_NAMES = ['padding', 'maxLength', 'truncation', 'addSpecialTokens'] as const;
const PADDING = [false, true, 'longest', 'max_length', 'do_not_pad'] as const;
const TRUNCATION = [false, true, 'longest_first', 'only_first', 'do_not_truncate'] as const;

/** What planEncode needs to know of the tokenizer. */
export interface PaddingFacts {
  /** The length 'max_length' padding and truncation default to. */
  readonly modelMaxLength: number;
  /** The pad token; padding needs one. */
  readonly padToken: string | undefined;
  /** Names the tokenizer in messages. */
  readonly description: string;
}

/** encode()'s options checked and resolved by transformers' rules (see the header). */
export function planEncode(value: unknown, tokenizer: PaddingFacts): EncodePlan {
  const options = checkKnownOptions<EncodeOptions>('encode options', value, OPTION_NAMES);
  const { padding = false, truncation, maxLength } = options;
  if (!(PADDING as readonly unknown[]).includes(padding)) throw invalidParameter('padding', "false, 'longest' (or true) or 'max_length'", padding);
  if (truncation !== undefined && !(TRUNCATION as readonly unknown[]).includes(truncation)) throw invalidParameter('truncation', 'true or false', truncation);
  if (maxLength !== undefined) checkInteger('maxLength', maxLength, 1);
  const addSpecialTokens = options.addSpecialTokens === undefined ? true : checkBoolean('addSpecialTokens', options.addSpecialTokens);

  const pad = padding === true || padding === 'longest' ? 'longest' : padding === 'max_length' ? 'max_length' : 'none';
  // as transformers: maxLength alone (no padding, truncation not said) truncates
  const truncate = truncation === undefined ? maxLength !== undefined && padding === false : truncation !== false && truncation !== 'do_not_truncate';

  let length = maxLength;
  if (length === undefined && (pad === 'max_length' || truncate)) {
    const what = pad === 'max_length' ? "padding: 'max_length'" : 'truncation';
    if (tokenizer.modelMaxLength > LARGE_INTEGER) {
      throw new DTorchError(
        ErrorCode.InvalidArgument,
        `${what} needs a length, and ${tokenizer.description} has no model_max_length in its tokenizer_config.json: pass maxLength`,
      );
    }
    length = tokenizer.modelMaxLength;
  }
  if (pad !== 'none' && tokenizer.padToken === undefined) {
    throw new DTorchError(
      ErrorCode.InvalidArgument,
      `padding needs a pad token, and ${tokenizer.description} has none (no pad_token in tokenizer_config.json or special_tokens_map.json): encode without padding, or give the folder a pad_token`,
    );
  }
  return { padding: pad, truncation: truncate, maxLength: pad === 'max_length' || truncate ? length : undefined, addSpecialTokens };
}
