// T5Tokenizer as transformers v5 builds it (models/t5/tokenization_t5.py; spiece.model as
// convert_slow_tokenizer's SentencePieceExtractor and T5Converter read it): a Unigram model over
// the sentencepiece pieces then the sentinels <extra_id_99> ... <extra_id_0>, sentencepiece's
// Precompiled normalizer, whitespace split + Metaspace, and </s> after each sequence.
import { Unigram, templateProcessing } from 'tokenizers';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { addedToken } from './added_token.js';
import { PieceType, readSentencePieceModel } from './sentencepiece_model.js';
import type { Backend, TokenizerClass } from './tokenizer_class.js';
import type { TokenizerJson } from './tokenizer_json.js';

type UnigramVocab = [string, number][];

/** T5Tokenizer puts the unknown token at id 2 (pad 0, eos 1, unk 2). */
const T5_UNK_ID = 2;

function t5Backend(vocab: UnigramVocab, precompiledCharsmap: string | undefined): Backend {
  const metaspace = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true };
  const json: TokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: precompiledCharsmap ? { type: 'Precompiled', precompiled_charsmap: precompiledCharsmap } : null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, metaspace] },
    post_processor: null,
    decoder: metaspace,
    model: { type: 'Unigram', unk_id: T5_UNK_ID, vocab, byte_fallback: false },
  };
  return { json, model: Unigram.init(vocab, { unkId: T5_UNK_ID, byteFallback: false }) };
}

function sentinels(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `<extra_id_${i}>`);
}

/** The Precompiled normalizer's charsmap, alone or inside a Sequence, as transformers looks for it. */
function precompiledCharsmapOf(json: TokenizerJson): string | undefined {
  const normalizer = json.normalizer;
  if (!normalizer) return undefined;
  const all = normalizer.type === 'Sequence' ? ((normalizer.normalizers as Record<string, unknown>[] | undefined) ?? []) : [normalizer];
  const precompiled = all.find((n) => n.type === 'Precompiled' && typeof n.precompiled_charsmap === 'string');
  return precompiled?.precompiled_charsmap as string | undefined;
}

/** transformers' T5Tokenizer: Unigram from spiece.model (or tokenizer.json's vocabulary), with the <extra_id_N> sentinels. */
export const t5Tokenizer: TokenizerClass = {
  name: 'T5Tokenizer',
  specialTokenDefaults: { eos_token: '</s>', unk_token: '<unk>', pad_token: '<pad>' },
  slowFiles: ['spiece.model'],

  fromTokenizerJson(json, _named, where) {
    const vocab = json.model.vocab;
    const unigram = Array.isArray(vocab) && vocab.every((e) => Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'number');
    if ((json.model.type !== undefined && json.model.type !== 'Unigram') || !unigram) {
      throw new DTorchError(ErrorCode.BadFile, `${where}: T5Tokenizer needs a Unigram model (vocab [["piece", score], ...]) but this one is ${json.model.type ?? 'untyped'}`);
    }
    return t5Backend(vocab as UnigramVocab, precompiledCharsmapOf(json));
  },

  fromSlowFiles([spiece], config, _named, [where]) {
    const model = readSentencePieceModel(spiece!, String(where));
    // T5Converter.convert_from_spm: the pieces, then the sentinels, last one first
    const vocab: UnigramVocab = model.pieces.map((p) => [p.piece, p.score]);
    for (const sentinel of sentinels(config.extraIds).reverse()) vocab.push([sentinel, 0]);
    // SentencePieceExtractor: control pieces are special added tokens, user-defined ones plain added tokens
    const extraSpecialTokens = model.pieces
      .filter((p) => p.type === PieceType.Control || p.type === PieceType.UserDefined)
      .map((p) => addedToken(p.piece, { special: p.type === PieceType.Control, normalized: false }));
    return { ...t5Backend(vocab, model.normalizerSpec.precompiledCharsmap || undefined), extraSpecialTokens };
  },

  defaultExtraSpecialTokens: (config) => sentinels(config.extraIds).map((s) => addedToken(s, { special: true })),

  // as T5Tokenizer: the template names "</s>" and gives it the eos token's id
  postProcessor(backend, named) {
    const eos = backend.tokenToId(named.get('eos_token')?.content ?? '</s>');
    if (eos === null) throw new DTorchError(ErrorCode.Internal, 'T5Tokenizer: the eos token has no id after the special tokens were added');
    return templateProcessing('$A </s>', '$A </s> $B </s>', [['</s>', eos]]);
  },
};
