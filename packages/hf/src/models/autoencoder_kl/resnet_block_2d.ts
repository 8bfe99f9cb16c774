// ResnetBlock2D as the VAE uses it (no time embedding, pre-norm, output scale 1): norm1, act,
// conv1, norm2, act, conv2, plus the input (through a 1x1 conv_shortcut when the channel count
// changes). Keys as diffusers' resnet.py.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import type { Activation } from '../activations.js';
import { through } from './through.js';

/** diffusers' ResnetBlock2D as the VAE has it (no time embedding): x + conv2(act(norm2(conv1(act(norm1(x)))))). */
export class ResnetBlock2D extends nn.Module {
  /** The config's act_fn. */
  readonly act: Activation;
  /** Group norm over the input channels. */
  norm1: nn.GroupNorm;
  /** 3x3, input to output channels. */
  conv1: nn.Conv2d;
  /** Group norm over the output channels. */
  norm2: nn.GroupNorm;
  /** 3x3, output to output channels. */
  conv2: nn.Conv2d;
  /** 1x1 over the skip path when the channel count changes; else undefined. */
  conv_shortcut: nn.Conv2d | undefined;

  constructor(inChannels: number, outChannels: number, groups: number, eps: number, act: Activation, options: ModelOptions) {
    super();
    this.act = act;
    this.norm1 = new nn.GroupNorm(groups, inChannels, { ...options, eps });
    this.conv1 = new nn.Conv2d(inChannels, outChannels, 3, { ...options, padding: 1 });
    this.norm2 = new nn.GroupNorm(groups, outChannels, { ...options, eps });
    this.conv2 = new nn.Conv2d(outChannels, outChannels, 3, { ...options, padding: 1 });
    this.conv_shortcut = inChannels !== outChannels ? new nn.Conv2d(inChannels, outChannels, 1, options) : undefined;
  }

  /** [batch, in, h, w] to [batch, out, h, w]. */
  forward(x: dt.Tensor): dt.Tensor {
    const out = through(x, [(t) => this.norm1.forward(t), this.act, (t) => this.conv1.forward(t), (t) => this.norm2.forward(t), this.act, (t) => this.conv2.forward(t)]);
    const skip = this.conv_shortcut ? this.conv_shortcut.forward(x) : x;
    const sum = skip.add(out);
    dt.dispose(skip === x ? [out] : [out, skip]);
    return sum;
  }
}
