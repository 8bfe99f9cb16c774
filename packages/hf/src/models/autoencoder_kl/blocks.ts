// The VAE's blocks, keys as diffusers' unet_2d_blocks.py: DownEncoderBlock2D (ResNets, then a
// Downsample2D but at the last level), UpDecoderBlock2D (ResNets, then an Upsample2D but at the
// last level) and UNetMidBlock2D (a ResNet, then attention and a ResNet). Each ResNet runs in
// its own tidy() so a block holds one level's intermediates at a time.
import type * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import type { Activation } from '../activations.js';
import { ResnetBlock2D } from './resnet_block_2d.js';
import { through } from './through.js';
import { Downsample2D, Upsample2D } from './sampling.js';
import { VAEAttention } from './vae_attention.js';

/** What every block of one VAE shares: group count, epsilon (1e-6), activation, where the weights live. */
export interface BlockSettings {
  /** The config's norm_num_groups. */
  groups: number;
  /** The group norms' epsilon. */
  eps: number;
  /** The config's act_fn. */
  act: Activation;
  /** Where the weights live, in which dtype. */
  options: ModelOptions;
}

function resnets(count: number, inChannels: number, outChannels: number, s: BlockSettings): nn.ModuleList<ResnetBlock2D> {
  return new nn.ModuleList(Array.from({ length: count }, (_, i) => new ResnetBlock2D(i === 0 ? inChannels : outChannels, outChannels, s.groups, s.eps, s.act, s.options)));
}

/** x through each module in turn, each in its own tidy(), each intermediate freed once used (x is left as it is). */
export function chain(x: dt.Tensor, modules: Iterable<nn.Module & { forward(x: dt.Tensor): dt.Tensor }>): dt.Tensor {
  return through(x, [...modules].map((m) => (t: dt.Tensor) => m.call(t)));
}

/** diffusers' DownEncoderBlock2D: ResNets, then a Downsample2D (but at the last level); checkpoint keys encoder.down_blocks.N.*. */
export class DownEncoderBlock2D extends nn.Module {
  /** layers_per_block ResnetBlock2Ds, the first changing the channel count. */
  resnets: nn.ModuleList<ResnetBlock2D>;
  /** One Downsample2D (downsamplers.0), or undefined at the last level. */
  downsamplers: nn.ModuleList<Downsample2D> | undefined;

  constructor(layers: number, inChannels: number, outChannels: number, addDownsample: boolean, s: BlockSettings) {
    super();
    this.resnets = resnets(layers, inChannels, outChannels, s);
    this.downsamplers = addDownsample ? new nn.ModuleList([new Downsample2D(outChannels, s.options)]) : undefined;
  }

  /** [batch, in, H, W] to [batch, out, H / 2, W / 2] (H, W at the last level). */
  forward(x: dt.Tensor): dt.Tensor {
    return chain(x, [...this.resnets, ...(this.downsamplers ?? [])]);
  }
}

/** diffusers' UpDecoderBlock2D: ResNets, then an Upsample2D (but at the last level); checkpoint keys decoder.up_blocks.N.*. */
export class UpDecoderBlock2D extends nn.Module {
  /** layers_per_block + 1 ResnetBlock2Ds, the first changing the channel count. */
  resnets: nn.ModuleList<ResnetBlock2D>;
  /** One Upsample2D (upsamplers.0), or undefined at the last level. */
  upsamplers: nn.ModuleList<Upsample2D> | undefined;

  constructor(layers: number, inChannels: number, outChannels: number, addUpsample: boolean, s: BlockSettings) {
    super();
    this.resnets = resnets(layers, inChannels, outChannels, s);
    this.upsamplers = addUpsample ? new nn.ModuleList([new Upsample2D(outChannels, s.options)]) : undefined;
  }

  /** [batch, in, h, w] to [batch, out, 2h, 2w] (h, w at the last level). */
  forward(x: dt.Tensor): dt.Tensor {
    return chain(x, [...this.resnets, ...(this.upsamplers ?? [])]);
  }
}

/** diffusers' UNetMidBlock2D as the VAE has it: a ResNet, self-attention, a ResNet; checkpoint keys encoder.mid_block.* and decoder.mid_block.*. */
export class UNetMidBlock2D extends nn.Module {
  /** Empty when the config has mid_block_add_attention false. */
  attentions: nn.ModuleList<VAEAttention>;
  /** Two ResnetBlock2Ds, before and after the attention. */
  resnets: nn.ModuleList<ResnetBlock2D>;

  constructor(channels: number, addAttention: boolean, s: BlockSettings) {
    super();
    // one head of all the channels (diffusers' attention_head_dim = block_out_channels[-1])
    this.attentions = new nn.ModuleList(addAttention ? [new VAEAttention(channels, channels, s.groups, s.eps, s.options)] : []);
    this.resnets = resnets(2, channels, channels, s);
  }

  /** [batch, channels, h, w] to the same shape. */
  forward(x: dt.Tensor): dt.Tensor {
    const [first, second] = [this.resnets.at(0), this.resnets.at(1)];
    return chain(x, [first, ...this.attentions, second]);
  }
}
