// AutoencoderKL: diffusers' KL VAE (the image autoencoder of Stable Diffusion, SD3 and Flux):
// encode(images) gives the latent distribution, decode(latents) the images, keys as diffusers'
// checkpoints (encoder.*, decoder.*, quant_conv, post_quant_conv). decode returns the decoder's
// raw output like diffusers' decode(z).sample; the caller scales latents first as pipelines do
// (z / scalingFactor + shiftFactor). Data parallel: on a mesh with a 'dp' dim the batch is split
// over it (a replicated input is sliced locally); every weight is replicated. Patch parallel
// (enablePatchParallel): the image's rows split over other mesh dims (patch_parallel.ts).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkBoolean, checkKnownOptions } from '@dtorch/common';
import { AutoencoderKLConfig } from './autoencoder_kl_config.js';
import { PreTrainedModel, type ModelOptions } from '../../loading/pretrained_model.js';
import { batchPlacements } from '../../parallel/batch.js';
import { diagonalGaussian, type DiagonalGaussianDistribution } from './diagonal_gaussian.js';
import { patchParallelDims, rowSplitForward } from './patch_parallel.js';
import { rowConv, rowDecoder, rowEncoder } from './row_layers.js';
import type { RowSplit } from './row_split.js';
import { decodeTiling, encodeTiling, tiled } from './tiling.js';
import { Decoder, Encoder } from './vae.js';

/** The options of AutoencoderKL.encode and decode. */
export interface AutoencoderKLTilingOptions {
  /**
   * Run in overlapping tiles (diffusers' tiled_decode / _tiled_encode) when the input is larger
   * than one tile; default whether enableTiling() was called.
   */
  tiled?: boolean;
  /**
   * Split the image by rows over mesh dims (xDiT's DistVAE): true every dim of the mesh, false
   * none, or dim names; dims the batch is split over keep splitting the batch. Default as
   * enablePatchParallel / disablePatchParallel chose (off when neither was called). A tiled
   * call runs unsplit.
   */
  patchParallel?: boolean | string | readonly string[];
}

// the attention names of diffusers' older attention block, which its loader still converts
const deprecatedAttention: Record<string, string> = { to_q: 'query', to_k: 'key', to_v: 'value', 'to_out.0': 'proj_attn' };

/**
 * diffusers' AutoencoderKL: the KL VAE of Stable Diffusion, SD3 and Flux, with its checkpoint keys.
 * encode(images) gives the latent distribution, decode(latents) the images (the caller scales the
 * latents, as pipelines do). On a mesh with a 'dp' dim the batch is split over it; the weights
 * are replicated.
 *
 * Patch parallel (xDiT's DistVAE): `vae.enablePatchParallel('ulysses')` (or `true` for every
 * mesh dim, or the `patchParallel` option of one call) splits the image by rows over those mesh
 * dims' devices: each device runs its rows, with one halo row from each neighbour per 3x3
 * convolution, group-norm statistics summed over all the rows, and the mid block's attention
 * over the keys and values of every row. The result equals one device's to float rounding;
 * each device holds about 1/n of the activations. Pipelines decode this way over the dims that
 * idle while the VAE runs (all but those the batch splits) unless disablePatchParallel() was
 * called.
 */
export class AutoencoderKL extends PreTrainedModel {
  /** The config the model was built from. */
  readonly config: AutoencoderKLConfig;
  /** Images to the latent distribution's parameters, checkpoint keys encoder.*. */
  encoder: Encoder;
  /** Latents to images, checkpoint keys decoder.*. */
  decoder: Decoder;
  /** A 1x1 conv over the encoder's 2 x latent_channels output; undefined when the config's use_quant_conv is false. */
  quant_conv: nn.Conv2d | undefined;
  /** A 1x1 conv over the latents before the decoder; undefined when the config's use_post_quant_conv is false. */
  post_quant_conv: nn.Conv2d | undefined;
  /** Whether encode() and decode() tile inputs larger than one tile (enableTiling / disableTiling), as diffusers' use_tiling. */
  useTiling = false;
  /** The side of a decoded tile; default the config's sample_size. */
  tileSampleMinSize: number;
  /** The side of a latent tile: tileSampleMinSize / 2^(levels - 1). */
  tileLatentMinSize: number;
  /** The fraction of a tile that neighbouring tiles overlap and blend over (diffusers' tile_overlap_factor, 0.25). */
  tileOverlapFactor = 0.25;
  /**
   * The mesh dims encode() and decode() split image rows over (enablePatchParallel /
   * disablePatchParallel): true every dim, false none, or dim names; undefined when neither was
   * called (off, but pipelines decode split over every dim).
   */
  patchParallel: boolean | readonly string[] | undefined = undefined;

  constructor(config: AutoencoderKLConfig, options: ModelOptions = {}) {
    super();
    this.config = config;
    const o = { mesh: options.mesh ?? dt.defaultMesh(), dtype: options.dtype ?? config.dtype ?? 'float32' };
    this.encoder = new Encoder(config, o);
    this.decoder = new Decoder(config, o);
    const latent = config.latentChannels;
    this.quant_conv = config.useQuantConv ? new nn.Conv2d(2 * latent, 2 * latent, 1, o) : undefined;
    this.post_quant_conv = config.usePostQuantConv ? new nn.Conv2d(latent, latent, 1, o) : undefined;
    const sample = config.sampleSize;
    this.tileSampleMinSize = typeof sample === 'number' ? sample : sample[0];
    this.tileLatentMinSize = Math.floor(this.tileSampleMinSize / 2 ** config.downsamplings);
  }

  /** Reads the model's config.json. */
  static readConfig(path: string): AutoencoderKLConfig {
    return AutoencoderKLConfig.fromFile(path);
  }

  /** The older attention block's names (query, key, value, proj_attn) for the mid block's to_q, to_k, to_v, to_out.0. */
  static override keyAliases(key: string): readonly string[] {
    const m = /^(.*\.attentions\.\d+\.)(to_q|to_k|to_v|to_out\.0)\.(weight|bias)$/.exec(key);
    return m ? [`${m[1]}${deprecatedAttention[m[2]!]}.${m[3]}`] : [];
  }

  /** Latents are multiplied by it after encoding (and divided before decoding) by pipelines. */
  get scalingFactor(): number {
    return this.config.scalingFactor;
  }

  /** Subtracted after encoding (before the scaling) and added back before decoding; null for SD 1.x/XL. */
  get shiftFactor(): number | null {
    return this.config.shiftFactor;
  }

  /** The mesh the weights are on. */
  get mesh(): dt.DeviceMesh {
    return this.encoder.conv_in.weight.mesh;
  }

  /** The weights' dtype; inputs must have it. */
  get dtype(): dt.DType {
    return this.encoder.conv_in.weight.dtype;
  }

  /** Makes encode() and decode() tile inputs larger than one tile (diffusers' enable_tiling); returns the model. */
  enableTiling(): this {
    this.useTiling = true;
    return this;
  }

  /** Undoes enableTiling(); returns the model. */
  disableTiling(): this {
    this.useTiling = false;
    return this;
  }

  /**
   * Makes encode() and decode() split the image by rows over the mesh dims `dims` (a name, a
   * list of names, or true, the default: every dim of the mesh); dims that split the batch keep
   * doing so. Returns the model. An unknown dim name is an INVALID_MESH error.
   */
  enablePatchParallel(dims: boolean | string | readonly string[] = true): this {
    patchParallelDims('AutoencoderKL.enablePatchParallel dims', this.mesh, dims);
    this.patchParallel = typeof dims === 'string' ? [dims] : dims;
    return this;
  }

  /** Makes encode() and decode() run unsplit by rows, pipelines' decoding too; returns the model. */
  disablePatchParallel(): this {
    this.patchParallel = false;
    return this;
  }

  /** images [batch, in_channels, H, W] (about [-1, 1]) → the latent distribution. */
  encode(images: dt.Tensor, options?: AutoencoderKLTilingOptions): DiagonalGaussianDistribution {
    const useTiles = this.tilingOption('AutoencoderKL.encode', options);
    const splitDims = this.patchParallelOption('AutoencoderKL.encode', options);
    const x = this.input('AutoencoderKL.encode images', images, this.config.inChannels, 'in_channels');
    const encodeTile = (tile: dt.Tensor) =>
      dt.tidy(() => {
        const moments = this.encoder.forward(tile);
        return this.quant_conv ? this.quant_conv.forward(moments) : moments;
      });
    const large = x.shape[2]! > this.tileSampleMinSize || x.shape[3]! > this.tileSampleMinSize;
    const encodeRows = () =>
      rowSplitForward(x, splitDims, this, { kind: 'encode', downsamplings: this.config.downsamplings }, (pieces, w) => {
        const features = rowEncoder(pieces, this.encoder, w);
        if (!this.quant_conv) return features;
        return disposingInput(features, rowConv(features, this.quant_conv, w));
      });
    const moments = useTiles && large ? tiled(x, encodeTiling(this.tileSampleMinSize, this.tileLatentMinSize, this.tileOverlapFactor), encodeTile) : (encodeRows() ?? encodeTile(x));
    if (x !== images) x.dispose();
    const posterior = dt.tidy(() => diagonalGaussian(moments));
    moments.dispose();
    return posterior;
  }

  /** latents [batch, latent_channels, h, w] (already unscaled) → images [batch, out_channels, h × 2^levels, w × 2^levels]. */
  decode(latents: dt.Tensor, options?: AutoencoderKLTilingOptions): dt.Tensor {
    const useTiles = this.tilingOption('AutoencoderKL.decode', options);
    const splitDims = this.patchParallelOption('AutoencoderKL.decode', options);
    const z = this.input('AutoencoderKL.decode latents', latents, this.config.latentChannels, 'latent_channels');
    const decodeTile = (tile: dt.Tensor) => dt.tidy(() => this.decoder.forward(this.post_quant_conv ? this.post_quant_conv.forward(tile) : tile));
    const large = z.shape[2]! > this.tileLatentMinSize || z.shape[3]! > this.tileLatentMinSize;
    const decodeRows = () =>
      rowSplitForward(z, splitDims, this, { kind: 'decode' }, (pieces, w) => {
        if (!this.post_quant_conv) return rowDecoder(pieces, this.decoder, w);
        const latents = rowConv(pieces, this.post_quant_conv, w);
        return disposingInput(latents, rowDecoder(latents, this.decoder, w));
      });
    const out = useTiles && large ? tiled(z, decodeTiling(this.tileSampleMinSize, this.tileLatentMinSize, this.tileOverlapFactor), decodeTile) : (decodeRows() ?? decodeTile(z));
    if (z !== latents) z.dispose();
    return out;
  }

  /** images → decode(the posterior's mode, or a sample from `seed` with samplePosterior), as diffusers' forward. */
  forward(images: dt.Tensor, options?: { samplePosterior?: boolean; seed?: number }): dt.Tensor {
    const o = checkKnownOptions<{ samplePosterior: boolean; seed: number }>('AutoencoderKL options', options, ['samplePosterior', 'seed']);
    const sampled = o.samplePosterior === undefined ? false : checkBoolean('AutoencoderKL samplePosterior', o.samplePosterior);
    return dt.tidy(() => {
      const posterior = this.encode(images);
      return this.decode(sampled ? posterior.sample(o.seed) : posterior.mode());
    });
  }

  private tilingOption(what: string, options: AutoencoderKLTilingOptions | undefined): boolean {
    const o = checkKnownOptions<AutoencoderKLTilingOptions>(`${what} options`, options, ['tiled', 'patchParallel']);
    return o.tiled === undefined ? this.useTiling : checkBoolean(`${what} tiled`, o.tiled);
  }

  // the mesh dims (indices) a call splits rows over: its option, else the model's choice
  private patchParallelOption(what: string, options: AutoencoderKLTilingOptions | undefined): number[] {
    const choice = options?.patchParallel ?? this.patchParallel ?? false;
    return patchParallelDims(`${what} patchParallel`, this.mesh, choice);
  }

  // a 4-D tensor on the model's mesh with `channels` channels and the model's dtype, its batch
  // split over 'dp' (a local slice when it is replicated there and the rows divide evenly)
  private input(what: string, x: dt.Tensor, channels: number, key: string): dt.Tensor {
    if (!(x instanceof dt.Tensor)) throw new DTorchError(ErrorCode.InvalidArgument, `${what} must be a Tensor [batch, ${channels}, height, width], got ${typeof x}`);
    if (!x.mesh.equals(this.mesh)) throw new DTorchError(ErrorCode.MeshMismatch, `${what} is on ${x.mesh} but the model on ${this.mesh}; create it on the model's mesh`);
    if (x.ndim !== 4 || x.shape[1] !== channels) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what} must be [batch, ${channels}, height, width] (${channels} = the config's ${key}), got ${x.describe()}`);
    }
    if (x.dtype !== this.dtype) throw new DTorchError(ErrorCode.DtypeMismatch, `${what} are ${x.dtype} but the model is ${this.dtype}; convert them with .to('${this.dtype}')`);
    const batch = batchPlacements(this.mesh);
    const dp = batch.findIndex((p) => p.isShard(0));
    if (dp < 0 || !x.placements[dp]!.isReplicate() || x.shape[0]! % this.mesh.shape[dp]! !== 0) return x;
    return x.redistribute(x.placements.map((p, d) => (d === dp ? dt.Shard(0) : p)));
  }
}

// `next`, with `input` (the step before it) freed
function disposingInput(input: RowSplit, next: RowSplit): RowSplit {
  input.dispose();
  return next;
}
