// CLIPTokenizer as transformers v5 builds it (models/clip/tokenization_clip.py; the slow files as
// convert_slow_tokenizer's CLIPConverter reads them): byte-level BPE with the "</w>" end-of-word
// suffix, NFC + whitespace runs to one space + lowercase, CLIP's split regex, <|startoftext|> ...
// <|endoftext|> around each sequence (RobertaProcessing), and decode's "</w>" to spaces.
import { robertaProcessing } from 'tokenizers';
import { DTorchError, ErrorCode, quoteText } from '@dtorch/common';
import type { AddedTokenSpec } from './added_token.js';
import type { TokenizerClass } from './tokenizer_class.js';
import type { TokenizerJson } from './tokenizer_json.js';

/** CLIP's pre-tokenizer split: its special tokens, English contractions, letters, one digit, other runs. */
const CLIP_SPLIT = String.raw`<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+`;
const END_OF_WORD = '</w>';

type Vocab = Record<string, number>;
type Merges = [string, string][];

function clipBackend(vocab: Vocab, merges: Merges, unkToken: string): TokenizerJson {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: {
      type: 'Sequence',
      normalizers: [{ type: 'NFC' }, { type: 'Replace', pattern: { Regex: String.raw`\s+` }, content: ' ' }, { type: 'Lowercase' }],
    },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: CLIP_SPLIT }, behavior: 'Removed', invert: true },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: unkToken,
      continuing_subword_prefix: '',
      end_of_word_suffix: END_OF_WORD,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

function checkVocab(vocab: unknown, where: string): Vocab {
  const ok = typeof vocab === 'object' && vocab !== null && !Array.isArray(vocab) && Object.values(vocab).every((id) => Number.isInteger(id) && id >= 0);
  if (!ok) throw new DTorchError(ErrorCode.BadFile, `${where}: expected the vocabulary as an object {"token": id, ...} of non-negative integer ids`);
  if (Object.keys(vocab).length === 0) throw new DTorchError(ErrorCode.BadFile, `${where}: the vocabulary is empty (no token has an id); the file is cut short or not a CLIP tokenizer's`);
  return vocab as Vocab;
}

/** merges.txt as tokenizers' BPE reads it: "#version" lines skipped, then one "a b" pair a line. */
function readMerges(text: string, where: string): Merges {
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  const merges: Merges = [];
  lines.forEach((line, i) => {
    if (line.startsWith('#version')) return;
    const parts = line.split(' ');
    if (parts.length !== 2) throw new DTorchError(ErrorCode.BadFile, `${where} line ${i + 1}: expected a merge "a b" but found ${quoteText(line)}`);
    merges.push(parts as [string, string]);
  });
  return merges;
}

/** tokenizer.json's merges: pairs, or "a b" strings in files written before tokenizers 0.20. */
function jsonMerges(merges: unknown, where: string): Merges {
  if (!Array.isArray(merges)) throw new DTorchError(ErrorCode.BadFile, `${where}: the BPE model has no "merges" list`);
  return merges.map((merge) => (typeof merge === 'string' ? merge.split(' ') : merge) as [string, string]);
}

/** The characters Python's str.isspace() accepts (JavaScript's \s differs: it has U+FEFF, lacks U+001C..U+001F and U+0085). */
const PYTHON_SPACE = String.raw`[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]`;
const PYTHON_STRIP = new RegExp(`^${PYTHON_SPACE}+|${PYTHON_SPACE}+$`, 'g');

/** Python's str.strip(). */
function pythonStrip(text: string): string {
  return text.replace(PYTHON_STRIP, '');
}

function unkOf(named: ReadonlyMap<string, AddedTokenSpec>): string {
  return named.get('unk_token')?.content ?? '<|endoftext|>';
}

/** transformers' CLIPTokenizer: BPE from vocab.json and merges.txt (or tokenizer.json's vocabulary). */
export const clipTokenizer: TokenizerClass = {
  name: 'CLIPTokenizer',
  specialTokenDefaults: { unk_token: '<|endoftext|>', bos_token: '<|startoftext|>', eos_token: '<|endoftext|>', pad_token: '<|endoftext|>' },
  slowFiles: ['vocab.json', 'merges.txt'],

  fromTokenizerJson(json, named, where) {
    if (json.model.type !== undefined && json.model.type !== 'BPE') {
      throw new DTorchError(ErrorCode.BadFile, `${where}: CLIPTokenizer needs a BPE model but this one is ${json.model.type}`);
    }
    return { json: clipBackend(checkVocab(json.model.vocab, where), jsonMerges(json.model.merges, where), unkOf(named)) };
  },

  fromSlowFiles([vocabFile, mergesFile], _config, named, [vocabName, mergesName]) {
    const decoder = new TextDecoder('utf-8', { fatal: false });
    let vocab: unknown;
    try {
      vocab = JSON.parse(decoder.decode(vocabFile));
    } catch (error) {
      throw new DTorchError(ErrorCode.BadFile, `${vocabName} is not valid JSON (${(error as Error).message})`);
    }
    const json = clipBackend(checkVocab(vocab, String(vocabName)), readMerges(decoder.decode(mergesFile), String(mergesName)), unkOf(named));
    return { json, extraSpecialTokens: [] };
  },

  defaultExtraSpecialTokens: () => [],

  postProcessor(backend, named) {
    const eos = named.get('eos_token')?.content ?? '<|endoftext|>';
    const bos = named.get('bos_token')?.content ?? '<|startoftext|>';
    return robertaProcessing([eos, idOf(backend, eos)], [bos, idOf(backend, bos)], false, false);
  },

  // transformers' CLIPTokenizer wraps the backend's decode: "</w>" to a space, then strip()
  cleanDecoded: (text) => pythonStrip(text.replaceAll(END_OF_WORD, ' ')),
};

function idOf(backend: { tokenToId(token: string): number | null }, token: string): number {
  const id = backend.tokenToId(token);
  if (id === null) throw new DTorchError(ErrorCode.Internal, `CLIPTokenizer: ${token} has no id after the special tokens were added`);
  return id;
}
