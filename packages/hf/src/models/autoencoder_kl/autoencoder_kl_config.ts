// AutoencoderKLConfig: diffusers' AutoencoderKL config keys and defaults
// (models/autoencoders/autoencoder_kl.py), camelCase. The VAE of SD 1.x/2.x/XL (4 latent
// channels), SD3 and Flux (16 latent channels, no quant convs, a shift factor).
import { ConfigReader, type Json, type JsonObject } from '../../configs/config_file.js';
import { PretrainedConfig, dictReader } from '../../configs/pretrained_config.js';

/** diffusers' get_activation names (lower-cased, as diffusers looks them up); mish is not in DTorch. */
export const vaeActivationNames: readonly string[] = ['silu', 'swish', 'gelu', 'relu'];

/** diffusers' AutoencoderKL config: the VAE's sizes and latent scaling (config.json keys in camelCase, diffusers' defaults). */
export class AutoencoderKLConfig extends PretrainedConfig {
  /** `in_channels`: the image's channels (default 3). */
  readonly inChannels: number;
  /** `out_channels`: the decoded image's channels (default 3). */
  readonly outChannels: number;
  /** One per resolution; each "DownEncoderBlock2D". */
  readonly downBlockTypes: readonly string[];
  /** One per resolution; each "UpDecoderBlock2D". */
  readonly upBlockTypes: readonly string[];
  /** `block_out_channels`: the channels at each resolution, highest first (default [64]; SD and Flux: [128, 256, 512, 512]). */
  readonly blockOutChannels: readonly number[];
  /** ResNets per encoder block (the decoder's blocks have one more). */
  readonly layersPerBlock: number;
  /** Lower-cased, as diffusers' get_activation reads it. */
  readonly actFn: string;
  /** `latent_channels`: channels of the latent (default 4; 16 for SD3 and Flux). */
  readonly latentChannels: number;
  /** `norm_num_groups`: groups of every GroupNorm (default 32). */
  readonly normNumGroups: number;
  /** The image size the tiles of tiled decoding take ([height, width] when the file gives two). */
  readonly sampleSize: number | readonly [number, number];
  /** `scaling_factor`: latents are (z - shift) * scaling_factor for the denoiser (default 0.18215, SD 1.x). */
  readonly scalingFactor: number;
  /** `shift_factor`: subtracted from the latents before scaling (SD3, Flux); null when absent. */
  readonly shiftFactor: number | null;
  /** `latents_mean`: per-channel latent means, which some pipelines normalise with in place of shift and scale; null when absent. */
  readonly latentsMean: readonly number[] | null;
  /** `latents_std`: per-channel latent standard deviations, with latents_mean; null when absent. */
  readonly latentsStd: readonly number[] | null;
  /** Pipelines run this VAE in float32 when the rest is float16 (diffusers' force_upcast). */
  readonly forceUpcast: boolean;
  /** `use_quant_conv`: a 1x1 conv after the encoder, checkpoint keys quant_conv.* (default true; false for SD3 and Flux). */
  readonly useQuantConv: boolean;
  /** `use_post_quant_conv`: a 1x1 conv before the decoder, checkpoint keys post_quant_conv.* (default true; false for SD3 and Flux). */
  readonly usePostQuantConv: boolean;
  /** `mid_block_add_attention`: the mid blocks have a self-attention between their two ResNets (default true). */
  readonly midBlockAddAttention: boolean;

  constructor(reader: ConfigReader) {
    super(reader);
    this.inChannels = positive(reader, 'in_channels', 3);
    this.outChannels = positive(reader, 'out_channels', 3);
    this.downBlockTypes = stringList(reader, 'down_block_types', ['DownEncoderBlock2D'], 'DownEncoderBlock2D');
    this.upBlockTypes = stringList(reader, 'up_block_types', ['UpDecoderBlock2D'], 'UpDecoderBlock2D');
    this.blockOutChannels = numberList(reader, 'block_out_channels', [64], true) as number[];
    this.layersPerBlock = positive(reader, 'layers_per_block', 1);
    const act = reader.string('act_fn', 'silu').toLowerCase();
    if (!vaeActivationNames.includes(act)) throw reader.bad('act_fn', `a known name (${vaeActivationNames.join(', ')})`, reader.json['act_fn']);
    this.actFn = act;
    this.latentChannels = positive(reader, 'latent_channels', 4);
    this.normNumGroups = positive(reader, 'norm_num_groups', 32);
    this.sampleSize = sampleSizeOf(reader);
    this.scalingFactor = reader.number('scaling_factor', 0.18215);
    this.shiftFactor = optionalNumber(reader, 'shift_factor');
    this.latentsMean = optionalList(reader, 'latents_mean');
    this.latentsStd = optionalList(reader, 'latents_std');
    this.forceUpcast = reader.boolean('force_upcast', true);
    this.useQuantConv = reader.boolean('use_quant_conv', true);
    this.usePostQuantConv = reader.boolean('use_post_quant_conv', true);
    this.midBlockAddAttention = reader.boolean('mid_block_add_attention', true);
    const levels = this.blockOutChannels.length;
    for (const key of ['down_block_types', 'up_block_types'] as const) {
      const n = (key === 'down_block_types' ? this.downBlockTypes : this.upBlockTypes).length;
      if (n !== levels) throw reader.bad(key, `a list of ${levels} names, one per entry of block_out_channels`, reader.json[key]);
    }
    for (const c of this.blockOutChannels) {
      if (c % this.normNumGroups !== 0) throw reader.bad('block_out_channels', `channel counts divisible by norm_num_groups (${this.normNumGroups})`, reader.json['block_out_channels']);
    }
    this.keepUnread(reader);
  }

  /** How many times the encoder halves the image (and the decoder doubles it). */
  get downsamplings(): number {
    return this.blockOutChannels.length - 1;
  }

  /** Reads a vae/config.json; a missing key takes diffusers' default, a wrong type is a BAD_CONFIG error naming it. */
  static fromFile(path: string): AutoencoderKLConfig {
    return new AutoencoderKLConfig(ConfigReader.fromFile(path));
  }

  /** From config.json's own keys, e.g. `AutoencoderKLConfig.fromDict({ latent_channels: 16 })`. */
  static fromDict(values: JsonObject): AutoencoderKLConfig {
    return new AutoencoderKLConfig(dictReader(values, 'AutoencoderKLConfig'));
  }
}

function positive(reader: ConfigReader, key: string, fallback: number): number {
  const value = reader.integer(key, fallback);
  if (value < 1) throw reader.bad(key, 'a positive integer', value);
  return value;
}

// a list read directly (ConfigReader has scalar reads only); the key is marked as read
function listOf(reader: ConfigReader, key: string): Json[] | undefined {
  reader.derived(key);
  const value = reader.json[key];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.length === 0) throw reader.bad(key, 'a non-empty list', value);
  return value;
}

function stringList(reader: ConfigReader, key: string, fallback: string[], only: string): string[] {
  const value = listOf(reader, key) ?? fallback;
  if (!value.every((v) => v === only)) throw reader.bad(key, `a list of "${only}" (the only block AutoencoderKL has)`, value);
  return value as string[];
}

function numberList(reader: ConfigReader, key: string, fallback: number[], positiveIntegers: boolean): number[] {
  const value = listOf(reader, key) ?? fallback;
  const ok = positiveIntegers ? (v: Json) => Number.isInteger(v) && (v as number) > 0 : (v: Json) => typeof v === 'number' && Number.isFinite(v);
  if (!value.every(ok)) throw reader.bad(key, positiveIntegers ? 'a list of positive integers' : 'a list of numbers', value);
  return value as number[];
}

function optionalList(reader: ConfigReader, key: string): number[] | null {
  return listOf(reader, key) === undefined ? null : numberList(reader, key, [], false);
}

function optionalNumber(reader: ConfigReader, key: string): number | null {
  reader.derived(key);
  const value = reader.json[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw reader.bad(key, 'a number or null', value);
  return value;
}

function sampleSizeOf(reader: ConfigReader): number | [number, number] {
  const value = reader.json['sample_size'];
  if (Array.isArray(value)) {
    const [h, w] = numberList(reader, 'sample_size', [], true);
    if (value.length !== 2) throw reader.bad('sample_size', 'an integer or a list [height, width]', value);
    return [h!, w!];
  }
  return positive(reader, 'sample_size', 32);
}
