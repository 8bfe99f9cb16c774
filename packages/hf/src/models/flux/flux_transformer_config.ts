// FluxTransformer2DConfig: diffusers' FluxTransformer2DModel config keys and defaults
// (transformer/config.json of FLUX.1-dev and FLUX.1-schnell), camelCase.
import { ConfigReader, type JsonObject } from '../../configs/config_file.js';
import { PretrainedConfig, dictReader } from '../../configs/pretrained_config.js';

/** diffusers' FluxTransformer2DModel config: the Flux transformer's sizes (config.json keys in camelCase, diffusers' defaults: FLUX.1's). */
export class FluxTransformer2DConfig extends PretrainedConfig {
  /** `patch_size` (default 1): the pipeline packs 2x2 latent patches itself, so the model sees one token per packed patch. */
  readonly patchSize: number;
  /** `in_channels`: channels of each packed latent token (default 64: 16 latent channels x 2x2). */
  readonly inChannels: number;
  /** out_channels, or in_channels when it is null or absent (as diffusers). */
  readonly outChannels: number;
  /** Double-stream blocks (text and image weights apart, joint attention). */
  readonly numLayers: number;
  /** Single-stream blocks (the joint sequence through one set of weights). */
  readonly numSingleLayers: number;
  /** `attention_head_dim`: each head's width (default 128). */
  readonly attentionHeadDim: number;
  /** `num_attention_heads`: attention heads (default 24). */
  readonly numAttentionHeads: number;
  /** Width of encoder_hidden_states (T5's d_model). */
  readonly jointAttentionDim: number;
  /** Width of pooled_projections (CLIP's pooled output). */
  readonly pooledProjectionDim: number;
  /** Guidance embedding (FLUX.1-dev, guidance-distilled); false for schnell. */
  readonly guidanceEmbeds: boolean;
  /** Rotary dims per position axis; they add up to attention_head_dim. */
  readonly axesDimsRope: readonly number[];

  constructor(reader: ConfigReader) {
    super(reader);
    this.patchSize = reader.integer('patch_size', 1);
    this.inChannels = reader.integer('in_channels', 64);
    this.outChannels = reader.optionalInteger('out_channels') ?? this.inChannels;
    this.numLayers = reader.integer('num_layers', 19);
    this.numSingleLayers = reader.integer('num_single_layers', 38);
    this.attentionHeadDim = reader.integer('attention_head_dim', 128);
    this.numAttentionHeads = reader.integer('num_attention_heads', 24);
    this.jointAttentionDim = reader.integer('joint_attention_dim', 4096);
    this.pooledProjectionDim = reader.integer('pooled_projection_dim', 768);
    this.guidanceEmbeds = reader.boolean('guidance_embeds', false);
    this.axesDimsRope = axesDims(reader, 'axes_dims_rope', [16, 56, 56]);
    const positive = [
      ['patch_size', this.patchSize], ['in_channels', this.inChannels], ['out_channels', this.outChannels],
      ['attention_head_dim', this.attentionHeadDim], ['num_attention_heads', this.numAttentionHeads],
      ['joint_attention_dim', this.jointAttentionDim], ['pooled_projection_dim', this.pooledProjectionDim],
    ] as const;
    for (const [name, value] of positive) if (value < 1) throw reader.bad(name, 'a positive integer', value);
    for (const [name, value] of [['num_layers', this.numLayers], ['num_single_layers', this.numSingleLayers]] as const) {
      if (value < 0) throw reader.bad(name, 'a non-negative integer', value);
    }
    const ropeDims = this.axesDimsRope.reduce((a, b) => a + b, 0);
    if (ropeDims !== this.attentionHeadDim) {
      throw reader.bad('axes_dims_rope', `even dims adding up to attention_head_dim (${this.attentionHeadDim})`, [...this.axesDimsRope]);
    }
    this.keepUnread(reader);
  }

  /** The transformer's width: numAttentionHeads * attentionHeadDim. */
  get innerDim(): number {
    return this.numAttentionHeads * this.attentionHeadDim;
  }

  /** Reads a transformer/config.json; a missing key takes diffusers' default, a wrong type is a BAD_CONFIG error naming it. */
  static fromFile(path: string): FluxTransformer2DConfig {
    return new FluxTransformer2DConfig(ConfigReader.fromFile(path));
  }

  /** From config.json's own keys, e.g. `FluxTransformer2DConfig.fromDict({ num_layers: 2 })`. */
  static fromDict(values: JsonObject): FluxTransformer2DConfig {
    return new FluxTransformer2DConfig(dictReader(values, 'FluxTransformer2DConfig'));
  }
}

// A list of positive even integers (diffusers saves the tuple as a JSON array).
function axesDims(reader: ConfigReader, key: string, fallback: number[]): number[] {
  const value = reader.json[key];
  reader.derived(key);
  if (value === undefined || value === null) return fallback;
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'number' && Number.isInteger(v) && v > 0 && v % 2 === 0)) {
    throw reader.bad(key, 'a non-empty array of positive even integers', value);
  }
  return value as number[];
}
