// Embedding: rows of a [numEmbeddings, embeddingDim] table picked by integer ids.
import * as dt from '@dtorch/api';
import { checkInteger } from '@dtorch/common';
import { normalParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';

/**
 * A lookup table, as torch.nn.Embedding: `new Embedding(numEmbeddings, embeddingDim, options)`;
 * the weight is replicated on every mesh dim and starts N(0, 1).
 */
export class Embedding extends Module {
  /** Rows in the table (ids run 0 to numEmbeddings - 1). */
  readonly numEmbeddings: number;
  /** Size of each embedding vector. */
  readonly embeddingDim: number;
  /** The table, [numEmbeddings, embeddingDim] (placements: see the class). */
  weight: Parameter;

  constructor(numEmbeddings: number, embeddingDim: number, options?: LayerOptions) {
    super();
    const name = this.constructor.name;
    this.numEmbeddings = checkInteger(`${name} numEmbeddings`, numEmbeddings, 1);
    this.embeddingDim = checkInteger(`${name} embeddingDim`, embeddingDim, 1);
    const o = layerOptions(name, options);
    this.weight = normalParameter([numEmbeddings, embeddingDim], { mesh: o.mesh, placements: this.weightPlacements(o.mesh), dtype: o.dtype });
  }

  /** Where the table lies (the parallel embedding overrides it). */
  protected weightPlacements(mesh: dt.DeviceMesh): dt.Placement[] {
    return replicated(mesh);
  }

  /** Integer `ids` of any shape -> [...ids.shape, embeddingDim]. */
  forward(ids: dt.Tensor): dt.Tensor {
    return dt.F.embedding(ids, this.weight);
  }

  override extraRepr(): string {
    return `${this.numEmbeddings}, ${this.embeddingDim}`;
  }
}
