// Embedding: rows of a [numEmbeddings, embeddingDim] table picked by integer ids.
import * as dt from '@dtorch/api';
import { checkInteger } from '@dtorch/common';
import { normalParameter } from '../init.js';
import { layerOptions, replicated, type LayerOptions } from '../layer_options.js';
import { Module } from '../module.js';
import type { Parameter } from '../parameter.js';

export class Embedding extends Module {
  readonly numEmbeddings: number;
  readonly embeddingDim: number;
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

  forward(ids: dt.Tensor): dt.Tensor {
    return dt.F.embedding(ids, this.weight);
  }

  override extraRepr(): string {
    return `${this.numEmbeddings}, ${this.embeddingDim}`;
  }
}
