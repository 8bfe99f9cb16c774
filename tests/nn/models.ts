// The TypeScript twins of tools/reference/make_nn_fixtures.py's PyTorch modules, with the same
// property names (so the same state-dict keys). `tp` picks the tensor-parallel layers; on a
// mesh without a 'tp' dim they are plain layers. `sp` (with tp) makes the Transformer sequence
// parallel: tokens sharded over 'tp' between the blocks' linears (Megatron-SP).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

export class MLP extends nn.Module {
  layers: nn.Sequential;
  norm: nn.LayerNorm;
  constructor(mesh: dt.DeviceMesh, tp: boolean) {
    super();
    this.layers = new nn.Sequential(
      tp ? new nn.ColumnParallelLinear(16, 64, { mesh }) : new nn.Linear(16, 64, { mesh }),
      new nn.GELU(),
      tp ? new nn.RowParallelLinearWithReplicateOutput(64, 16, { mesh }) : new nn.Linear(64, 16, { mesh }),
    );
    this.norm = new nn.LayerNorm(16, { mesh });
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.norm.forward(this.layers.forward(x));
  }
}

// The output linear of attention and feed-forward: row parallel, its output all-reduced, or
// reduce-scattered on the tokens under sequence parallelism.
function rowLinear(i: number, o: number, mesh: dt.DeviceMesh, tp: boolean, sp: boolean): nn.Linear {
  if (!tp) return new nn.Linear(i, o, { mesh });
  return sp ? new nn.RowParallelLinearWithSequenceParallelOutput(i, o, { mesh }) : new nn.RowParallelLinearWithReplicateOutput(i, o, { mesh });
}

class Attention extends nn.Module {
  to_q: nn.Linear;
  to_k: nn.Linear;
  to_v: nn.Linear;
  to_out: nn.ModuleList;
  constructor(readonly dim: number, readonly heads: number, mesh: dt.DeviceMesh, tp: boolean, sp: boolean) {
    super();
    const column = (i: number, o: number) => (tp ? new nn.ColumnParallelLinear(i, o, { mesh }) : new nn.Linear(i, o, { mesh }));
    this.to_q = column(dim, dim);
    this.to_k = column(dim, dim);
    this.to_v = column(dim, dim);
    const out = rowLinear(dim, dim, mesh, tp, sp);
    this.to_out = new nn.ModuleList([out, new nn.Dropout(0.0)]);
  }
  forward(x: dt.Tensor): dt.Tensor {
    const [b, s] = x.shape as [number, number];
    const split = (t: dt.Tensor) => t.reshape([b, s, this.heads, this.dim / this.heads]).transpose(1, 2);
    const [q, k, v] = [this.to_q, this.to_k, this.to_v].map((l) => split(l.forward(x))) as [dt.Tensor, dt.Tensor, dt.Tensor];
    const o = dt.F.scaledDotProductAttention(q, k, v).transpose(1, 2).reshape([b, s, this.dim]);
    return this.to_out.at(1).forward(this.to_out.at(0).forward(o)) as dt.Tensor;
  }
}

class FeedForward extends nn.Module {
  proj_in: nn.Linear;
  act = new nn.SiLU();
  proj_out: nn.Linear;
  constructor(dim: number, hidden: number, mesh: dt.DeviceMesh, tp: boolean, sp: boolean) {
    super();
    this.proj_in = tp ? new nn.ColumnParallelLinear(dim, hidden, { mesh }) : new nn.Linear(dim, hidden, { mesh });
    this.proj_out = rowLinear(hidden, dim, mesh, tp, sp);
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.proj_out.forward(this.act.forward(this.proj_in.forward(x)));
  }
}

class Block extends nn.Module {
  norm1: nn.LayerNorm;
  attn: Attention;
  norm2: nn.LayerNorm;
  ff: FeedForward;
  constructor(dim: number, heads: number, mesh: dt.DeviceMesh, tp: boolean, sp: boolean) {
    super();
    this.norm1 = new nn.LayerNorm(dim, { elementwiseAffine: false, eps: 1e-6, mesh });
    this.attn = new Attention(dim, heads, mesh, tp, sp);
    this.norm2 = new nn.LayerNorm(dim, { mesh });
    this.ff = new FeedForward(dim, 4 * dim, mesh, tp, sp);
  }
  forward(x: dt.Tensor): dt.Tensor {
    const h = x.add(this.attn.forward(this.norm1.forward(x)));
    return h.add(this.ff.forward(this.norm2.forward(h)));
  }
}

export class Transformer extends nn.Module {
  readonly sp: boolean;
  embed: nn.Embedding;
  transformer_blocks: nn.ModuleList<Block>;
  norm_out: nn.RMSNorm;
  proj_out: nn.Linear;
  constructor(mesh: dt.DeviceMesh, tp: boolean, { vocab = 50, dim = 32, heads = 4, depth = 2, sp = false } = {}) {
    super();
    this.sp = tp && sp;
    this.embed = tp ? new nn.EmbeddingWithReplicateOutput(vocab, dim, { mesh }) : new nn.Embedding(vocab, dim, { mesh });
    this.transformer_blocks = new nn.ModuleList(Array.from({ length: depth }, () => new Block(dim, heads, mesh, tp, this.sp)));
    this.norm_out = new nn.RMSNorm(dim, { eps: 1e-6, mesh });
    this.proj_out = tp ? new nn.ColumnParallelLinearWithReplicateInputOutput(dim, vocab, { mesh, bias: false }) : new nn.Linear(dim, vocab, { mesh, bias: false });
  }
  forward(ids: dt.Tensor): dt.Tensor {
    let x = this.embed.forward(ids);
    // sequence parallel: each tp rank keeps its chunk of the tokens between the linears
    if (this.sp) x = x.redistribute(x.placements.map((p, d) => (x.mesh.dimNames?.[d] === 'tp' ? dt.Shard(1) : p)));
    for (const block of this.transformer_blocks) x = block.forward(x);
    return this.proj_out.forward(this.norm_out.forward(x));
  }
}

export class ConvBlock extends nn.Module {
  conv_in: nn.Conv2d;
  norm: nn.GroupNorm;
  act = new nn.SiLU();
  conv_out: nn.Conv2d;
  constructor(mesh: dt.DeviceMesh) {
    super();
    this.conv_in = new nn.Conv2d(4, 8, 3, { padding: 1, mesh });
    this.norm = new nn.GroupNorm(2, 8, { mesh });
    this.conv_out = new nn.Conv2d(8, 4, 3, { stride: 2, padding: 1, groups: 2, mesh });
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.conv_out.forward(this.act.forward(this.norm.forward(this.conv_in.forward(x))));
  }
}
