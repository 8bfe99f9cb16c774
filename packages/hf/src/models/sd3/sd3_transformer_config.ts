// SD3Transformer2DConfig: diffusers' SD3Transformer2DModel config keys and defaults
// (transformer/config.json of stable-diffusion-3-medium-diffusers and 3.5), camelCase.
import { ConfigReader, type JsonObject } from '../../configs/config_file.js';
import { PretrainedConfig, dictReader } from '../../configs/pretrained_config.js';

/** The query/key norms SD3.5 uses ('rms_norm') and the other per-head one diffusers has for SD3 blocks. */
export const sd3QkNorms = ['rms_norm', 'layer_norm'] as const;
/** `qk_norm`: the per-head norm of queries and keys in the joint attention. */
export type SD3QkNorm = (typeof sd3QkNorms)[number];

/** diffusers' SD3Transformer2DModel config: the MMDiT's sizes (config.json keys in camelCase, diffusers' defaults). */
export class SD3Transformer2DConfig extends PretrainedConfig {
  /** `sample_size`: the latent height and width trained at (default 128); the pipeline's default image size is this times the VAE's scale factor. */
  readonly sampleSize: number;
  /** `patch_size`: latent pixels per patch side (default 2). */
  readonly patchSize: number;
  /** `in_channels`: the latent's channels (default 16). */
  readonly inChannels: number;
  /** `num_layers`: joint transformer blocks (default 18). */
  readonly numLayers: number;
  /** `attention_head_dim`: each head's width (default 64). */
  readonly attentionHeadDim: number;
  /** `num_attention_heads`: attention heads (default 18). */
  readonly numAttentionHeads: number;
  /** `joint_attention_dim`: the width of encoder_hidden_states, the text embeddings (default 4096). */
  readonly jointAttentionDim: number;
  /** `caption_projection_dim`: the text stream's width after context_embedder, equal to innerDim (default 1152). */
  readonly captionProjectionDim: number;
  /** `pooled_projection_dim`: the width of pooled_projections, the two CLIPs' pooled outputs side by side (default 2048). */
  readonly pooledProjectionDim: number;
  /** `out_channels`: channels of the predicted velocity (default 16; null means in_channels). */
  readonly outChannels: number;
  /** The largest latent height / width in patches; position embeddings are cropped from its grid. */
  readonly posEmbedMaxSize: number;
  /** Blocks with a second (image-only) attention, SD3.5's MMDiT-X; [] for SD3. */
  readonly dualAttentionLayers: readonly number[];
  /** `qk_norm`: "rms_norm" for SD3.5; null (the default, SD3) for none. */
  readonly qkNorm: SD3QkNorm | null;

  constructor(reader: ConfigReader) {
    super(reader);
    this.sampleSize = reader.integer('sample_size', 128);
    this.patchSize = reader.integer('patch_size', 2);
    this.inChannels = reader.integer('in_channels', 16);
    this.numLayers = reader.integer('num_layers', 18);
    this.attentionHeadDim = reader.integer('attention_head_dim', 64);
    this.numAttentionHeads = reader.integer('num_attention_heads', 18);
    this.jointAttentionDim = reader.integer('joint_attention_dim', 4096);
    this.captionProjectionDim = reader.integer('caption_projection_dim', 1152);
    this.pooledProjectionDim = reader.integer('pooled_projection_dim', 2048);
    // diffusers: out_channels null means in_channels
    this.outChannels = reader.optionalInteger('out_channels', 16) ?? this.inChannels;
    this.posEmbedMaxSize = reader.integer('pos_embed_max_size', 96);
    this.dualAttentionLayers = integerList(reader, 'dual_attention_layers');
    const qkNorm = reader.optionalString('qk_norm');
    if (qkNorm !== null && !(sd3QkNorms as readonly string[]).includes(qkNorm)) throw reader.bad('qk_norm', `null or one of ${sd3QkNorms.map((n) => JSON.stringify(n)).join(', ')}`, qkNorm);
    this.qkNorm = qkNorm as SD3QkNorm | null;
    const positive = [
      ['sample_size', this.sampleSize], ['patch_size', this.patchSize], ['in_channels', this.inChannels], ['num_layers', this.numLayers],
      ['attention_head_dim', this.attentionHeadDim], ['num_attention_heads', this.numAttentionHeads], ['joint_attention_dim', this.jointAttentionDim],
      ['caption_projection_dim', this.captionProjectionDim], ['pooled_projection_dim', this.pooledProjectionDim], ['out_channels', this.outChannels],
      ['pos_embed_max_size', this.posEmbedMaxSize],
    ] as const;
    for (const [name, value] of positive) if (value < 1) throw reader.bad(name, 'a positive integer', value);
    // the text stream joins the image stream's attention: both must have the transformer's width
    if (this.captionProjectionDim !== this.innerDim) {
      throw reader.bad('caption_projection_dim', `num_attention_heads * attention_head_dim (${this.innerDim}), the width of the joint attention`, this.captionProjectionDim);
    }
    // the sincos position embedding gives half of its width to each axis, and each half pairs sin with cos
    if (this.innerDim % 4 !== 0) throw reader.bad('attention_head_dim', `such that num_attention_heads * attention_head_dim is a multiple of 4 (it is ${this.innerDim})`, this.attentionHeadDim);
    this.keepUnread(reader);
  }

  /** The transformer's width: numAttentionHeads * attentionHeadDim. */
  get innerDim(): number {
    return this.numAttentionHeads * this.attentionHeadDim;
  }

  /** Reads a transformer/config.json; a missing key takes diffusers' default, a wrong type is a BAD_CONFIG error naming it. */
  static fromFile(path: string): SD3Transformer2DConfig {
    return new SD3Transformer2DConfig(ConfigReader.fromFile(path));
  }

  /** From config.json's own keys, e.g. `SD3Transformer2DConfig.fromDict({ num_layers: 2 })`. */
  static fromDict(values: JsonObject): SD3Transformer2DConfig {
    return new SD3Transformer2DConfig(dictReader(values, 'SD3Transformer2DConfig'));
  }
}

// A list of layer indices (diffusers saves the tuple as a JSON array); absent or null is [].
function integerList(reader: ConfigReader, key: string): number[] {
  const value = reader.json[key];
  reader.derived(key);
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'number' && Number.isInteger(v) && v >= 0)) {
    throw reader.bad(key, 'an array of layer indices (non-negative integers)', value);
  }
  return value as number[];
}
