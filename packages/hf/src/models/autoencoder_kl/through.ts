// Steps applied one after another with each intermediate freed as soon as it has been read.
import type * as dt from '@dtorch/api';

/**
 * x through each step in turn, each intermediate freed as soon as the next step has read it (x is
 * left as it is): the decoder's activations at 1024² are 256-512 MiB each, and a scope's tidy
 * would hold them all to its end.
 */
export function through(x: dt.Tensor, steps: Iterable<(t: dt.Tensor) => dt.Tensor>): dt.Tensor {
  let h = x;
  for (const step of steps) {
    const next = step(h);
    if (h !== x) h.dispose();
    h = next;
  }
  return h;
}
