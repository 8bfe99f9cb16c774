// Sequential: modules applied one after another, keyed 0, 1, 2, ... as torch.nn.Sequential.
import type * as dt from '@dtorch/api';
import type { Module } from './module.js';
import { ModuleList } from './module_list.js';

export class Sequential extends ModuleList {
  constructor(...modules: Module[]) {
    super(modules);
  }

  override forward(x: dt.Tensor): dt.Tensor {
    for (const m of this) x = m.forward(x) as dt.Tensor;
    return x;
  }
}
