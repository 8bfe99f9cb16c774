// Tensor-parallel embeddings: the table sharded on the embedding dim over 'tp' (each rank looks
// up its columns). ColumnParallelEmbedding leaves the output sharded on its last dim (for a
// consumer split the same way, e.g. T5's per-head position biases);
// EmbeddingWithReplicateOutput all-gathers the rows so the output is replicated.
import * as dt from '@dtorch/api';
import { Embedding } from '../layers/embedding.js';
import { onTpDim, toTp } from './tp_dim.js';

/**
 * An Embedding whose table [numEmbeddings, embeddingDim] is Shard(1) over the mesh's 'tp' dim:
 * each rank looks up its embeddingDim / tp columns.
 */
export class ColumnParallelEmbedding extends Embedding {
  protected override weightPlacements(mesh: dt.DeviceMesh): dt.Placement[] {
    return onTpDim(mesh, dt.Shard(1));
  }

  /** ids (replicated on 'tp' first) -> [...ids.shape, embeddingDim], Shard(last) on 'tp'. */
  override forward(ids: dt.Tensor): dt.Tensor {
    return dt.F.embedding(toTp(ids, dt.Replicate()), this.weight);
  }
}

/** A ColumnParallelEmbedding whose output is all-gathered: replicated on 'tp'. */
export class EmbeddingWithReplicateOutput extends ColumnParallelEmbedding {
  /** ids -> [...ids.shape, embeddingDim], Replicate on 'tp'. */
  override forward(ids: dt.Tensor): dt.Tensor {
    return toTp(super.forward(ids), dt.Replicate());
  }
}
