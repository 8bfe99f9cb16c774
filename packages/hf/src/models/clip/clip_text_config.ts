// CLIPTextConfig: transformers' CLIPTextConfig keys and defaults (models/clip/configuration_clip.py),
// camelCase. A full CLIPModel config.json (with "text_config" inside) gives its text part.
import { ConfigReader, type JsonObject } from '../../configs/config_file.js';
import { PretrainedConfig, dictReader } from '../../configs/pretrained_config.js';
import { activationNames } from '../activations.js';

/** transformers' CLIPTextConfig: the CLIP text encoder's sizes (config.json keys in camelCase, transformers' defaults). */
export class CLIPTextConfig extends PretrainedConfig {
  /** `vocab_size`: rows of the token embedding (default 49408). */
  readonly vocabSize: number;
  /** `hidden_size`: the hidden width (default 512; CLIP-L 768, CLIP-G 1280). */
  readonly hiddenSize: number;
  /** `intermediate_size`: the MLP's inner width (default 2048). */
  readonly intermediateSize: number;
  /** `projection_dim`: the width of text_projection's output (default 512; null reads as 512). */
  readonly projectionDim: number;
  /** `num_hidden_layers`: encoder layers (default 12). */
  readonly numHiddenLayers: number;
  /** `num_attention_heads`: attention heads, dividing hidden_size (default 8). */
  readonly numAttentionHeads: number;
  /** `max_position_embeddings`: the longest sequence, rows of the position embedding (default 77). */
  readonly maxPositionEmbeddings: number;
  /** "quick_gelu" (CLIP-L), "gelu" (CLIP-G), "gelu_new", "relu", ... */
  readonly hiddenAct: string;
  /** `layer_norm_eps`: the layer norms' epsilon (default 1e-5). */
  readonly layerNormEps: number;
  /** `pad_token_id` (default 1). */
  readonly padTokenId: number | null;
  /** `bos_token_id` (default 49406). */
  readonly bosTokenId: number | null;
  /** 2 is the legacy value: the pooled output is then taken at the largest id of each row. */
  readonly eosTokenId: number | null;

  constructor(file: ConfigReader) {
    // a CLIPModel's config: the text encoder's part
    const reader = file.nested('text_config') ?? file;
    super(reader);
    this.vocabSize = reader.integer('vocab_size', 49408);
    this.hiddenSize = reader.integer('hidden_size', 512);
    this.intermediateSize = reader.integer('intermediate_size', 2048);
    this.projectionDim = reader.optionalInteger('projection_dim', 512) ?? 512;
    this.numHiddenLayers = reader.integer('num_hidden_layers', 12);
    this.numAttentionHeads = reader.integer('num_attention_heads', 8);
    this.maxPositionEmbeddings = reader.integer('max_position_embeddings', 77);
    this.hiddenAct = reader.name('hidden_act', activationNames, 'quick_gelu');
    this.layerNormEps = reader.number('layer_norm_eps', 1e-5);
    this.padTokenId = reader.optionalInteger('pad_token_id', 1);
    this.bosTokenId = reader.optionalInteger('bos_token_id', 49406);
    this.eosTokenId = reader.optionalInteger('eos_token_id', 49407);
    const positive = [
      ['hidden_size', this.hiddenSize], ['intermediate_size', this.intermediateSize], ['projection_dim', this.projectionDim], ['num_attention_heads', this.numAttentionHeads],
      ['num_hidden_layers', this.numHiddenLayers], ['vocab_size', this.vocabSize], ['max_position_embeddings', this.maxPositionEmbeddings],
    ] as const;
    for (const [name, value] of positive) {
      if (value < 1) throw reader.bad(name, 'a positive integer', value);
    }
    if (this.hiddenSize % this.numAttentionHeads !== 0) {
      throw reader.bad('hidden_size', `a multiple of num_attention_heads (${this.numAttentionHeads})`, this.hiddenSize);
    }
    this.keepUnread(reader);
  }

  /** Each head's width: hiddenSize / numAttentionHeads. */
  get headDim(): number {
    return this.hiddenSize / this.numAttentionHeads;
  }

  /** Reads a config.json (a CLIPModel's gives its "text_config"); a missing key takes transformers' default. */
  static fromFile(path: string): CLIPTextConfig {
    return new CLIPTextConfig(ConfigReader.fromFile(path));
  }

  /** From config.json's own keys, e.g. `CLIPTextConfig.fromDict({ hidden_size: 768 })`. */
  static fromDict(values: JsonObject): CLIPTextConfig {
    return new CLIPTextConfig(dictReader(values, 'CLIPTextConfig'));
  }
}
