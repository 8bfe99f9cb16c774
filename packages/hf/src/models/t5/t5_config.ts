// T5Config: transformers' T5Config keys and defaults (models/t5/configuration_t5.py), camelCase.
import { ConfigReader, type JsonObject } from '../../configs/config_file.js';
import { PretrainedConfig, dictReader } from '../../configs/pretrained_config.js';
import { activationNames } from '../activations.js';

/** transformers' T5Config: the T5 encoder's sizes (config.json keys in camelCase, transformers' defaults: t5-small's). */
export class T5Config extends PretrainedConfig {
  /** `vocab_size`: rows of the shared token embedding (default 32128). */
  readonly vocabSize: number;
  /** `d_model`: the hidden width (default 512). */
  readonly dModel: number;
  /** Size of each head's key/value projection. */
  readonly dKv: number;
  /** `d_ff`: the feed-forward's inner width (default 2048). */
  readonly dFf: number;
  /** `num_layers`: encoder blocks (default 6). */
  readonly numLayers: number;
  /** `num_heads`: attention heads (default 8). */
  readonly numHeads: number;
  /** `relative_attention_num_buckets`: buckets of the relative position bias (default 32). */
  readonly relativeAttentionNumBuckets: number;
  /** `relative_attention_max_distance`: the distance beyond which relative positions share a bucket (default 128). */
  readonly relativeAttentionMaxDistance: number;
  /** `dropout_rate` (default 0.1); read and kept, inference does not use it. */
  readonly dropoutRate: number;
  /** `layer_norm_epsilon`: the RMS norms' epsilon (default 1e-6). */
  readonly layerNormEpsilon: number;
  /** `initializer_factor`: the scale of transformers' weight init (default 1.0); kept, weights come from the checkpoint. */
  readonly initializerFactor: number;
  /** "relu" (T5 v1.0) or "gated-gelu" (v1.1), or `[gated-]<activation>`. */
  readonly feedForwardProj: string;
  /** The feed-forward activation: the part after "gated-" ("gated-gelu" means "gelu_new"). */
  readonly denseActFn: string;
  /** Whether the feed-forward is gated (wi_0, wi_1): feed_forward_proj starts with "gated-". */
  readonly isGatedAct: boolean;
  /** `pad_token_id` (default 0). */
  readonly padTokenId: number | null;
  /** `eos_token_id` (default 1). */
  readonly eosTokenId: number | null;

  constructor(reader: ConfigReader) {
    super(reader);
    this.vocabSize = reader.integer('vocab_size', 32128);
    this.dModel = reader.integer('d_model', 512);
    this.dKv = reader.integer('d_kv', 64);
    this.dFf = reader.integer('d_ff', 2048);
    this.numLayers = reader.integer('num_layers', 6);
    this.numHeads = reader.integer('num_heads', 8);
    this.relativeAttentionNumBuckets = reader.integer('relative_attention_num_buckets', 32);
    this.relativeAttentionMaxDistance = reader.integer('relative_attention_max_distance', 128);
    this.dropoutRate = reader.number('dropout_rate', 0.1);
    this.layerNormEpsilon = reader.number('layer_norm_epsilon', 1e-6);
    this.initializerFactor = reader.number('initializer_factor', 1.0);
    this.feedForwardProj = reader.string('feed_forward_proj', 'relu');
    const parts = this.feedForwardProj.split('-');
    if ((parts.length > 1 && parts[0] !== 'gated') || parts.length > 2) {
      throw reader.bad('feed_forward_proj', 'of the form "gated-{ACT_FN}" or "{ACT_FN}", e.g. "gated-gelu" or "relu"', this.feedForwardProj);
    }
    // derived from feed_forward_proj, as transformers derives them (a saved dense_act_fn is ignored)
    this.isGatedAct = parts[0] === 'gated';
    this.denseActFn = this.feedForwardProj === 'gated-gelu' ? 'gelu_new' : parts.at(-1)!;
    if (!activationNames.includes(this.denseActFn)) throw reader.bad('feed_forward_proj', `"[gated-]<activation>" with a known activation (${activationNames.join(', ')})`, this.feedForwardProj);
    reader.derived('dense_act_fn', 'is_gated_act');
    this.padTokenId = reader.optionalInteger('pad_token_id', 0);
    this.eosTokenId = reader.optionalInteger('eos_token_id', 1);
    const positive = [
      ['d_model', this.dModel], ['d_kv', this.dKv], ['d_ff', this.dFf], ['num_heads', this.numHeads], ['num_layers', this.numLayers], ['vocab_size', this.vocabSize],
      ['relative_attention_num_buckets', this.relativeAttentionNumBuckets], ['relative_attention_max_distance', this.relativeAttentionMaxDistance],
    ] as const;
    for (const [name, value] of positive) {
      if (value < 1) throw reader.bad(name, 'a positive integer', value);
    }
    this.keepUnread(reader);
  }

  /** Reads a config.json; a missing key takes transformers' default, a wrong type is a BAD_CONFIG error naming it. */
  static fromFile(path: string): T5Config {
    return new T5Config(ConfigReader.fromFile(path));
  }

  /** From config.json's own keys, e.g. `T5Config.fromDict({ d_model: 32, num_heads: 4 })`. */
  static fromDict(values: JsonObject): T5Config {
    return new T5Config(dictReader(values, 'T5Config'));
  }
}
