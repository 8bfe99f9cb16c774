// The VAE's Encoder (image → the parameters of the latent distribution, 2 × latent_channels) and
// Decoder (latents → image), keys as diffusers' vae.py. Both end in a group norm, SiLU (whatever
// act_fn says, as diffusers) and a 3x3 conv.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { AutoencoderKLConfig } from './autoencoder_kl_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { activation } from '../activations.js';
import { DownEncoderBlock2D, UNetMidBlock2D, UpDecoderBlock2D, chain, type BlockSettings } from './blocks.js';

const EPS = 1e-6;

function settings(config: AutoencoderKLConfig, options: ModelOptions): BlockSettings {
  return { groups: config.normNumGroups, eps: EPS, act: activation(config.actFn, `${config.file} act_fn`), options };
}

// h through the blocks, then norm, SiLU and conv_out; h and every intermediate freed
function head(h: dt.Tensor, blocks: (nn.Module & { forward(x: dt.Tensor): dt.Tensor })[], norm: nn.GroupNorm, conv: nn.Conv2d): dt.Tensor {
  const features = chain(h, blocks);
  h.dispose();
  const out = dt.tidy(() => conv.forward(dt.F.silu(norm.forward(features))));
  features.dispose();
  return out;
}

/** diffusers' Encoder (vae.py): conv_in, down blocks, mid block, norm, SiLU, conv_out; checkpoint keys encoder.*. */
export class Encoder extends nn.Module {
  /** 3x3, in_channels to block_out_channels[0]. */
  conv_in: nn.Conv2d;
  /** One DownEncoderBlock2D per entry of block_out_channels. */
  down_blocks: nn.ModuleList<DownEncoderBlock2D>;
  /** At the lowest resolution, block_out_channels[-1] channels. */
  mid_block: UNetMidBlock2D;
  /** Group norm before the SiLU and conv_out. */
  conv_norm_out: nn.GroupNorm;
  /** 3x3, to 2 x latent_channels (mean and logvar). */
  conv_out: nn.Conv2d;

  constructor(config: AutoencoderKLConfig, options: ModelOptions) {
    super();
    const s = settings(config, options);
    const channels = config.blockOutChannels;
    const last = channels.at(-1)!;
    this.conv_in = new nn.Conv2d(config.inChannels, channels[0]!, 3, { ...options, padding: 1 });
    this.down_blocks = new nn.ModuleList(
      channels.map((out, i) => new DownEncoderBlock2D(config.layersPerBlock, i === 0 ? channels[0]! : channels[i - 1]!, out, i < channels.length - 1, s)),
    );
    this.mid_block = new UNetMidBlock2D(last, config.midBlockAddAttention, s);
    this.conv_norm_out = new nn.GroupNorm(config.normNumGroups, last, { ...options, eps: EPS });
    this.conv_out = new nn.Conv2d(last, 2 * config.latentChannels, 3, { ...options, padding: 1 });
  }

  /** images [batch, in_channels, H, W] → [batch, 2 × latent_channels, H / 2^levels, W / 2^levels] (mean, then logvar). */
  forward(x: dt.Tensor): dt.Tensor {
    return head(this.conv_in.forward(x), [...this.down_blocks, this.mid_block], this.conv_norm_out, this.conv_out);
  }
}

/** diffusers' Decoder (vae.py): conv_in, mid block, up blocks, norm, SiLU, conv_out; checkpoint keys decoder.*. */
export class Decoder extends nn.Module {
  /** 3x3, latent_channels to block_out_channels[-1]. */
  conv_in: nn.Conv2d;
  /** At the lowest resolution, block_out_channels[-1] channels. */
  mid_block: UNetMidBlock2D;
  /** One UpDecoderBlock2D per entry of block_out_channels, the channels reversed. */
  up_blocks: nn.ModuleList<UpDecoderBlock2D>;
  /** Group norm before the SiLU and conv_out. */
  conv_norm_out: nn.GroupNorm;
  /** 3x3, block_out_channels[0] to out_channels. */
  conv_out: nn.Conv2d;

  constructor(config: AutoencoderKLConfig, options: ModelOptions) {
    super();
    const s = settings(config, options);
    const reversed = [...config.blockOutChannels].reverse();
    this.conv_in = new nn.Conv2d(config.latentChannels, reversed[0]!, 3, { ...options, padding: 1 });
    this.mid_block = new UNetMidBlock2D(reversed[0]!, config.midBlockAddAttention, s);
    this.up_blocks = new nn.ModuleList(
      reversed.map((out, i) => new UpDecoderBlock2D(config.layersPerBlock + 1, i === 0 ? reversed[0]! : reversed[i - 1]!, out, i < reversed.length - 1, s)),
    );
    this.conv_norm_out = new nn.GroupNorm(config.normNumGroups, reversed.at(-1)!, { ...options, eps: EPS });
    this.conv_out = new nn.Conv2d(reversed.at(-1)!, config.outChannels, 3, { ...options, padding: 1 });
  }

  /** latents [batch, latent_channels, h, w] → images [batch, out_channels, h × 2^levels, w × 2^levels]. */
  forward(z: dt.Tensor): dt.Tensor {
    return head(this.conv_in.forward(z), [this.mid_block, ...this.up_blocks], this.conv_norm_out, this.conv_out);
  }
}
