#!/usr/bin/env node
// bench/redistribute: all-gather (S->R), all-reduce (P->R) and all-to-all (S(0)->S(1)) on CPU
// meshes of 2 and 4 devices, next to a plain memcpy of the same bytes in the same run. Prints a
// JSON line per collective and mesh:
//   bytes:        bytes the collective writes into its outputs, summed over ranks
//   gbps:         those bytes per second of wall time (recorded .. synced)
//   memcpy_gbps:  one thread copying the same number of bytes into fresh memory, as the
//                 collective's outputs are (TypedArray allocation + set)
//   memcpy_warm_gbps: the same copy into memory already touched
//   vs_memcpy:    gbps / memcpy_gbps (above 1 when the ranks' worker threads copy in parallel)
// Usage: node bench/redistribute/run.mjs  (ELEMENTS, REPEATS env to change the size)
import * as dt from '@dtorch/api';

const elements = Number(process.env.ELEMENTS ?? 4 * 1024 * 1024); // 16 MiB of float32
const repeats = Number(process.env.REPEATS ?? 5);
dt.setCaptureStacks(false);

function memcpyGbps(bytes, fresh) {
  const src = new Uint8Array(bytes).fill(1);
  let dst = new Uint8Array(bytes);
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const t = process.hrtime.bigint();
    if (fresh) dst = new Uint8Array(bytes);
    dst.set(src);
    best = Math.min(best, Number(process.hrtime.bigint() - t));
  }
  return bytes / best; // bytes per ns = GB/s
}

async function timeRedistribute(make, placements) {
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const x = make();
    await dt.sync();
    const t = process.hrtime.bigint();
    const y = x.redistribute(placements);
    await dt.sync();
    best = Math.min(best, Number(process.hrtime.bigint() - t));
    dt.dispose([x, y]);
  }
  return best;
}

const cols = 64;
const rows = elements / cols;
const full = elements * 4;
for (const n of [2, 4]) {
  const mesh = new dt.DeviceMesh('cpu', Array.from({ length: n }, (_, i) => i));
  const cases = [
    // every rank ends with the full tensor
    { collective: 'all_gather', from: [dt.Shard(0)], to: [dt.Replicate()], bytes: n * full },
    // every rank sums n full tensors into one
    { collective: 'all_reduce', from: [dt.Partial()], to: [dt.Replicate()], bytes: n * full },
    // every rank ends with 1/n of the tensor
    { collective: 'all_to_all', from: [dt.Shard(0)], to: [dt.Shard(1)], bytes: full },
  ];
  for (const c of cases) {
    const ns = await timeRedistribute(() => dt.ones([rows, cols], { mesh, placements: c.from }), c.to);
    const gbps = c.bytes / ns;
    const memcpy = memcpyGbps(c.bytes, true);
    console.log(
      JSON.stringify({
        bench: 'redistribute',
        collective: c.collective,
        devices: n,
        tensor_bytes: full,
        bytes: c.bytes,
        ms: +(ns / 1e6).toFixed(3),
        gbps: +gbps.toFixed(2),
        memcpy_gbps: +memcpy.toFixed(2),
        memcpy_warm_gbps: +memcpyGbps(c.bytes, false).toFixed(2),
        vs_memcpy: +(gbps / memcpy).toFixed(3),
      }),
    );
  }
}
