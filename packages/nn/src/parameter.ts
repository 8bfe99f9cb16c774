// Parameter: a Tensor that a Module owns (weights, biases). It carries its mesh and placements
// like any Tensor, and lives until its module replaces or disposes it: no tidy() frees it.
import * as dt from '@dtorch/api';
import { invalidParameter } from '@dtorch/common';

/**
 * A Tensor that a Module owns (weights, biases), as torch.nn.Parameter: kept, so no tidy()
 * frees it; it lives until its module replaces or disposes it. Same mesh and placements as the
 * tensor it takes over.
 */
export class Parameter extends dt.Tensor {
  // the tensor whose engine value this parameter took over: held so that its finalizer (which
  // releases the same id) cannot run while the parameter is alive
  readonly #source: dt.Tensor;

  /** Takes over `data` (do not dispose it yourself; dispose the parameter or its module). */
  constructor(data: dt.Tensor) {
    if (!(data instanceof dt.Tensor)) throw invalidParameter('Parameter data', 'Tensor', data);
    super(data.id, data.shape, data.dtype, data.mesh, data.placements);
    this.#source = dt.keep(data);
    dt.keep(this);
  }

  /** Releases the value (and the tensor it took over, which shares it); a second call does nothing. */
  override dispose(): void {
    super.dispose();
    this.#source.dispose(); // the same id: a second release is ignored
  }

  /** `Parameter(...)` around the Tensor's own description. */
  override toString(): string {
    return `Parameter(${super.toString()})`;
  }
}
