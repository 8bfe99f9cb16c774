// Runs context-parallel attention cases one by one with progress output (device debugging).
import * as dt from '../../packages/api/dist/index.js';
const one = new dt.DeviceMesh('cpu', [0]);
for (const [names, shape, causal] of [[['ulysses'], [2, 4, 7, 8], false], [['ring'], [2, 2, 8, 4], false], [['ring'], [1, 2, 7, 4], true]]) {
  for (const n of [2, 3]) {
    const mesh = new dt.DeviceMesh('cpu', Array.from({ length: n }, (_, i) => i), names);
    console.log('case', names, n, shape, causal);
    const [q, k, v] = [1, 2, 3].map((s) => dt.randn(shape, { seed: s, mesh, placements: [dt.Shard(2)] }));
    const out = dt.F.scaledDotProductAttention(q, k, v, { isCausal: causal });
    console.log(' recorded');
    await out.data();
    console.log(' ok');
  }
}
const x = dt.randn([5, 2, 6, 4], { seed: 1, mesh: one });
console.log('plain sdpa'); await dt.F.scaledDotProductAttention(x, x, x).data(); console.log(' ok');
