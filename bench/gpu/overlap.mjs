#!/usr/bin/env node
// bench/gpu: communication overlapping compute. Each of LAYERS layers has its weight sharded
// S(0) over 2 GPUs; the forward all-gathers the next layer's weight while this layer's matmul
// runs (the prefetch FSDP does). Collectives run on each worker's communication stream, so the
// two should take about the longer of the two, not their sum. Three timings, best of ROUNDS:
//   gather   the all-gathers alone
//   matmul   the matmuls alone (on weights gathered beforehand)
//   both     the prefetching forward
// Each timing is repeated for every SM carve-out in CARVEOUTS (SMs cuBLAS leaves free: Hopper's
// matmuls otherwise hold every SM until they end, and a collective beside them waits).
// Prints JSON lines; overlap_efficiency = (gather + matmul - both) / min(gather, matmul): 1 is
// perfect overlap, 0 none.
//   DEVICE=cuda node bench/gpu/overlap.mjs     (ROWS, FEATURES, LAYERS, ROUNDS)
import * as dt from '@dtorch/api';

const device = process.env.DEVICE ?? 'cuda';
const rows = Number(process.env.ROWS ?? 2048);
const features = Number(process.env.FEATURES ?? 8192);
const layers = Number(process.env.LAYERS ?? 8);
const rounds = Number(process.env.ROUNDS ?? 5);
const carveouts = (process.env.CARVEOUTS ?? (device === 'cuda' ? '0,8,16,32' : '0')).split(',').map(Number);
const dtype = device === 'cuda' ? 'bfloat16' : 'float32';
dt.setCaptureStacks(false);

const mesh = new dt.DeviceMesh(device, [0, 1], ['dp']);
const R = [dt.Replicate()];
const shards = Array.from({ length: layers }, (_, l) => dt.randn([features, features], { seed: l, dtype, mesh, placements: [dt.Shard(0)] }).mul(0.01));
const gatheredAhead = shards.map((w) => w.redistribute(R));
const x = dt.randn([rows, features], { seed: 100, dtype, mesh });

// Outputs are disposed only after the sync: work whose result is dropped unread within its own
// segment is dead code, which the controller never runs.
const gatherOnly = () => shards.map((w) => w.redistribute(R));
const matmulOnly = () => dt.tidy(() => { let h = x; for (const w of gatheredAhead) h = h.matmul(w); return h; });
const prefetching = () =>
  dt.tidy(() => {
    let next = shards[0].redistribute(R);
    let h = x;
    for (let l = 0; l < layers; l++) {
      const current = next;
      if (l + 1 < layers) next = shards[l + 1].redistribute(R); // queued before this layer's matmul
      h = h.matmul(current);
    }
    return h;
  });

async function time(run) {
  let best = Infinity;
  for (let r = 0; r < rounds + 1; r++) {
    await dt.sync();
    const start = process.hrtime.bigint();
    const out = run();
    await dt.sync();
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    dt.dispose(out);
    if (r > 0) best = Math.min(best, ms); // round 0 warms up (and creates the communicators)
  }
  return best;
}

for (const carveout of carveouts) {
  if (device === 'cuda') dt.cuda.setSMCarveout(carveout);
  const gather = await time(gatherOnly);
  const matmul = await time(matmulOnly);
  const both = await time(prefetching);
  // the prefetching forward computes what the plain one does
  const [a, b] = [matmulOnly(), prefetching()];
  const same = (await a.sub(b).abs().max().item()) === 0;
  dt.dispose([a, b]);
  const line = { bench: 'gpu_overlap', device, gpus: 2, rows, features, layers, dtype, sm_carveout: carveout };
  console.log(JSON.stringify({ ...line, ms_gather: +gather.toFixed(3), ms_matmul: +matmul.toFixed(3), ms_both: +both.toFixed(3), same_result: same }));
  console.log(
    JSON.stringify({
      ...line,
      summary: true,
      both_vs_max: +(both / Math.max(gather, matmul)).toFixed(3),
      both_vs_sum: +(both / (gather + matmul)).toFixed(3),
      overlap_efficiency: +((gather + matmul - both) / Math.min(gather, matmul)).toFixed(3),
    }),
  );
}
if (device === 'cuda') dt.cuda.setSMCarveout(0);
