// The VAE, as diffusers' AutoencoderKL: its config, the model (tiling as enable_tiling), the
// latent distribution encode() gives, and its submodules (named and nested as the checkpoint's
// keys, encoder.*, decoder.*).
export { AutoencoderKLConfig } from './autoencoder_kl_config.js';
export { AutoencoderKL, type AutoencoderKLTilingOptions } from './autoencoder_kl.js';
export { type DiagonalGaussianDistribution } from './diagonal_gaussian.js';
export { Encoder, Decoder } from './vae.js';
export { DownEncoderBlock2D, UpDecoderBlock2D, UNetMidBlock2D, type BlockSettings } from './blocks.js';
export { ResnetBlock2D } from './resnet_block_2d.js';
export { Downsample2D, Upsample2D } from './sampling.js';
export { VAEAttention } from './vae_attention.js';
