// The tokenizer classes built from transformers' code (see tokenizer_class.ts), by the name
// tokenizer_config.json gives ("CLIPTokenizer"; "CLIPTokenizerFast" is the same class in v5).
import { clipTokenizer } from './clip_tokenizer.js';
import { t5Tokenizer } from './t5_tokenizer.js';
import type { TokenizerClass } from './tokenizer_class.js';

const CLASSES: readonly TokenizerClass[] = [clipTokenizer, t5Tokenizer];

/** The class of tokenizer_config.json's tokenizer_class `name`, if DTorch builds it from transformers' code. */
export function tokenizerClassNamed(name: string | undefined): TokenizerClass | undefined {
  return CLASSES.find((c) => c.name === name);
}

/** Every class that can be built from slow files, for messages. */
export function slowTokenizerClasses(): readonly TokenizerClass[] {
  return CLASSES;
}
