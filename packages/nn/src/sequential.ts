// Sequential: modules applied one after another, keyed 0, 1, 2, ... as torch.nn.Sequential.
import type * as dt from '@dtorch/api';
import type { Module } from './module.js';
import { ModuleList } from './module_list.js';

/**
 * Modules applied one after another, as torch.nn.Sequential: `new Sequential(a, b, c)`, keyed
 * 0, 1, 2, ... in state dicts.
 */
export class Sequential extends ModuleList {
  constructor(...modules: Module[]) {
    super(modules);
  }

  /** Each module's forward() on the previous one's output, starting from `x`; `x` itself when empty. */
  override forward(x: dt.Tensor): dt.Tensor {
    for (const m of this) x = m.forward(x) as dt.Tensor;
    return x;
  }
}
