// The VAE's resolution changes: Downsample2D (a 3x3 conv of stride 2 after padding right and
// bottom by one, as diffusers with downsample_padding 0) and Upsample2D (nearest x2, then a 3x3
// conv). Each holds its conv as `conv`, the checkpoint's key.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { through } from './through.js';

/** diffusers' Downsample2D (downsample_padding 0): pad right and bottom by one, then a 3x3 conv of stride 2. */
export class Downsample2D extends nn.Module {
  /** 3x3, stride 2 (checkpoint keys downsamplers.0.conv.*). */
  conv: nn.Conv2d;

  constructor(channels: number, options: ModelOptions) {
    super();
    this.conv = new nn.Conv2d(channels, channels, 3, { ...options, stride: 2 });
  }

  /** [batch, c, h, w] to [batch, c, h / 2, w / 2]. */
  forward(x: dt.Tensor): dt.Tensor {
    return through(x, [(t) => dt.F.pad(t, [0, 1, 0, 1]), (t) => this.conv.forward(t)]);
  }
}

/** diffusers' Upsample2D: nearest x2, then a 3x3 conv. */
export class Upsample2D extends nn.Module {
  /** 3x3, padding 1 (checkpoint keys upsamplers.0.conv.*). */
  conv: nn.Conv2d;

  constructor(channels: number, options: ModelOptions) {
    super();
    this.conv = new nn.Conv2d(channels, channels, 3, { ...options, padding: 1 });
  }

  /** [batch, c, h, w] to [batch, c, 2h, 2w]. */
  forward(x: dt.Tensor): dt.Tensor {
    return through(x, [(t) => dt.F.interpolate(t, { scaleFactor: 2, mode: 'nearest' }), (t) => this.conv.forward(t)]);
  }
}
