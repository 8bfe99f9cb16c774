// EmbeddingWithReplicateOutput: the table sharded on the embedding dim over 'tp' (each rank
// looks up its columns), the rows all-gathered so the output is replicated.
import * as dt from '@dtorch/api';
import { Embedding } from '../layers/embedding.js';
import { onTpDim, toTp } from './tp_dim.js';

export class EmbeddingWithReplicateOutput extends Embedding {
  protected override weightPlacements(mesh: dt.DeviceMesh): dt.Placement[] {
    return onTpDim(mesh, dt.Shard(1));
  }

  override forward(ids: dt.Tensor): dt.Tensor {
    return toTp(dt.F.embedding(toTp(ids, dt.Replicate()), this.weight), dt.Replicate());
  }
}
