// A sentencepiece model file (spiece.model): a ModelProto protobuf message, read with protobufjs
// and the fields of sentencepiece's sentencepiece_model.proto that a converter needs (same names,
// numbers and defaults; the others are skipped when decoding).
import protobuf from 'protobufjs';
import { DTorchError, ErrorCode } from '@dtorch/common';

const SENTENCEPIECE_MODEL_PROTO = `
syntax = "proto2";
package sentencepiece;

message TrainerSpec {
  enum ModelType { UNIGRAM = 1; BPE = 2; WORD = 3; CHAR = 4; }
  optional ModelType model_type = 3 [default = UNIGRAM];
  optional int32 vocab_size = 4 [default = 8000];
  optional bool byte_fallback = 35 [default = false];
  optional int32 unk_id = 40 [default = 0];
  optional int32 bos_id = 41 [default = 1];
  optional int32 eos_id = 42 [default = 2];
  optional int32 pad_id = 43 [default = -1];
  optional string unk_piece = 45 [default = "<unk>"];
  optional string bos_piece = 46 [default = "<s>"];
  optional string eos_piece = 47 [default = "</s>"];
  optional string pad_piece = 48 [default = "<pad>"];
}

message NormalizerSpec {
  optional string name = 1;
  optional bytes precompiled_charsmap = 2;
  optional bool add_dummy_prefix = 3 [default = true];
  optional bool remove_extra_whitespaces = 4 [default = true];
  optional bool escape_whitespaces = 5 [default = true];
}

message ModelProto {
  message SentencePiece {
    enum Type { NORMAL = 1; UNKNOWN = 2; CONTROL = 3; USER_DEFINED = 4; BYTE = 6; UNUSED = 5; }
    optional string piece = 1;
    optional float score = 2;
    optional Type type = 3 [default = NORMAL];
  }
  repeated SentencePiece pieces = 1;
  optional TrainerSpec trainer_spec = 2;
  optional NormalizerSpec normalizer_spec = 3;
}
`;

/** SentencePiece.Type */
export const PieceType = { Normal: 1, Unknown: 2, Control: 3, UserDefined: 4, Unused: 5, Byte: 6 } as const;
/** TrainerSpec.ModelType */
export const ModelType = { Unigram: 1, Bpe: 2, Word: 3, Char: 4 } as const;

/** One piece of the vocabulary (ModelProto.SentencePiece). */
export interface SentencePiece {
  /** The piece's text (▁ for a space). */
  readonly piece: string;
  /** Its score: the log probability for Unigram, the merge priority for BPE. */
  readonly score: number;
  /** A PieceType value. */
  readonly type: number;
}

/** The fields of a ModelProto this package reads, camelCase. */
export interface SentencePieceModel {
  /** The vocabulary, in id order. */
  readonly pieces: readonly SentencePiece[];
  /** TrainerSpec's model type, special ids and pieces. */
  readonly trainerSpec: {
    readonly modelType: number;
    readonly byteFallback: boolean;
    readonly unkId: number;
    readonly bosId: number;
    readonly eosId: number;
    readonly padId: number;
    readonly unkPiece: string;
    readonly bosPiece: string;
    readonly eosPiece: string;
    readonly padPiece: string;
  };
  /** NormalizerSpec's fields. */
  readonly normalizerSpec: {
    readonly name: string;
    /** base64, as tokenizer.json's Precompiled normalizer holds it ('' when the model has none) */
    readonly precompiledCharsmap: string;
    readonly addDummyPrefix: boolean;
    readonly removeExtraWhitespaces: boolean;
  };
}

let types: { model: protobuf.Type; trainer: protobuf.Type; normalizer: protobuf.Type } | undefined;

function protoTypes() {
  if (types === undefined) {
    const root = protobuf.parse(SENTENCEPIECE_MODEL_PROTO, { keepCase: true }).root;
    types = {
      model: root.lookupType('sentencepiece.ModelProto'),
      trainer: root.lookupType('sentencepiece.TrainerSpec'),
      normalizer: root.lookupType('sentencepiece.NormalizerSpec'),
    };
  }
  return types;
}

/** `where` names the file in messages. */
export function readSentencePieceModel(bytes: Uint8Array, where: string): SentencePieceModel {
  const { model, trainer, normalizer } = protoTypes();
  let message: Record<string, protobuf.Message | undefined> & { pieces: protobuf.Message[] };
  try {
    message = model.decode(bytes) as never;
  } catch (error) {
    throw new DTorchError(ErrorCode.BadFile, `${where} is not a sentencepiece model (${(error as Error).message}); give the spiece.model the tokenizer was trained with`);
  }
  const options = { defaults: true, enums: Number, bytes: String, longs: Number };
  const pieces = message.pieces.map((p) => model.lookupType('SentencePiece').toObject(p, options) as SentencePiece);
  if (pieces.length === 0) throw new DTorchError(ErrorCode.BadFile, `${where} holds no pieces: it is not a trained sentencepiece model`);
  // a sub-message the file leaves out reads as its defaults
  const t = trainer.toObject(message.trainer_spec ?? trainer.create(), options);
  const n = normalizer.toObject(message.normalizer_spec ?? normalizer.create(), options);
  return {
    pieces: pieces.map((p) => ({ piece: p.piece, score: p.score, type: p.type })),
    trainerSpec: {
      modelType: t.model_type,
      byteFallback: t.byte_fallback,
      unkId: t.unk_id,
      bosId: t.bos_id,
      eosId: t.eos_id,
      padId: t.pad_id,
      unkPiece: t.unk_piece,
      bosPiece: t.bos_piece,
      eosPiece: t.eos_piece,
      padPiece: t.pad_piece,
    },
    normalizerSpec: {
      name: n.name,
      precompiledCharsmap: n.precompiled_charsmap,
      addDummyPrefix: n.add_dummy_prefix,
      removeExtraWhitespaces: n.remove_extra_whitespaces,
    },
  };
}
