#!/usr/bin/env node
// What each device holds for one logical 4 x 4 tensor under each placement, on 2 CPU devices:
// Shard(0) and Shard(1) split rows or columns, Replicate gives both the whole tensor, and
// Partial('sum') gives each a part whose sum is the value (a matmul over a sharded inner dim ends
// so; reading it, or redistributing to Replicate, sums the parts with one all-reduce).
//   node examples/placements.mjs
import * as dt from '@dtorch/api';

const mesh = new dt.DeviceMesh('cpu', [0, 1]);
const x = dt.arange(16, { mesh, dtype: 'float32' }).reshape([4, 4]); // Replicate by default

for (const placement of [dt.Shard(0), dt.Shard(1), dt.Replicate()]) {
  const t = x.redistribute([placement]);
  console.log(`${placement}:`);
  for (const rank of [0, 1]) console.log(`  cpu:${rank} holds`, JSON.stringify(await dt.toLocal(t, rank).array()));
}

// a Partial('sum') tensor: a matmul whose inner dim (the columns of a, the rows of b) is sharded
const a = x.redistribute([dt.Shard(1)]);
const b = dt.eye(4, { mesh }).redistribute([dt.Shard(0)]);
const p = a.matmul(b);
console.log(`${p.placements[0]} (a matmul over a sharded inner dim):`);
for (const rank of [0, 1]) console.log(`  cpu:${rank} holds`, JSON.stringify(await dt.toLocal(p, rank).array()));
console.log('  the value (the sum of the parts):', JSON.stringify(await p.array()));
console.log(dt.explainRedistribute(p, [dt.Replicate()]).join('\n'));
