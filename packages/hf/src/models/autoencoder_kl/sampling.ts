// The VAE's resolution changes: Downsample2D (a 3x3 conv of stride 2 after padding right and
// bottom by one, as diffusers with downsample_padding 0) and Upsample2D (nearest x2, then a 3x3
// conv). Each holds its conv as `conv`, the checkpoint's key.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import type { ModelOptions } from '../../loading/pretrained_model.js';

export class Downsample2D extends nn.Module {
  conv: nn.Conv2d;

  constructor(channels: number, options: ModelOptions) {
    super();
    this.conv = new nn.Conv2d(channels, channels, 3, { ...options, stride: 2 });
  }

  forward(x: dt.Tensor): dt.Tensor {
    return this.conv.forward(dt.F.pad(x, [0, 1, 0, 1]));
  }
}

export class Upsample2D extends nn.Module {
  conv: nn.Conv2d;

  constructor(channels: number, options: ModelOptions) {
    super();
    this.conv = new nn.Conv2d(channels, channels, 3, { ...options, padding: 1 });
  }

  forward(x: dt.Tensor): dt.Tensor {
    return this.conv.forward(dt.F.interpolate(x, { scaleFactor: 2, mode: 'nearest' }));
  }
}
