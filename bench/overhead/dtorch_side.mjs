// DTorch side of bench/overhead: `x = x.add(1)` on a [1] float32 tensor, 1 CPU device.
//   record_ns:     JS-thread time per x.add(1) (nothing read, nothing released in the loop)
//   loop_ns:       JS-thread time per step of the realistic loop (add, then dispose the old x)
//   completion_ns: time per step until the value of the last x is read, the engine running
//                  alongside the JS thread (pipelined)
import * as dt from '@dtorch/api';

function timeLoop(iters, captureStacks, mesh) {
  dt.setCaptureStacks(captureStacks);
  // record cost: keep every output alive so no release is timed
  let x = dt.zeros([1], { mesh });
  const outs = new Array(iters);
  let start = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) outs[i] = x = x.add(1);
  const recordNs = Number(process.hrtime.bigint() - start) / iters;
  dt.dispose(outs);
  return recordNs;
}

async function completion(iters, captureStacks, mesh) {
  dt.setCaptureStacks(captureStacks);
  let x = dt.zeros([1], { mesh });
  await dt.sync();
  const start = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) {
    const next = x.add(1);
    x.dispose();
    x = next;
  }
  const loopNs = Number(process.hrtime.bigint() - start) / iters;
  const value = await x.item();
  const completionNs = Number(process.hrtime.bigint() - start) / iters;
  if (value !== iters) throw new Error(`wrong result ${value}`);
  x.dispose();
  return { loopNs, completionNs };
}

export async function runDTorchSide(iters, repeats, device = 'cpu') {
  const mesh = new dt.DeviceMesh(device, [0]);
  const rows = [];
  // one untimed pass first: the JIT and the heap grow up before either setting is timed
  timeLoop(iters, true, mesh);
  await dt.sync();
  await completion(iters, true, mesh);
  for (const captureStacks of [false, true]) {
    let best = { recordNs: Infinity, loopNs: Infinity, completionNs: Infinity };
    for (let r = 0; r < repeats; r++) {
      const recordNs = timeLoop(iters, captureStacks, mesh);
      await dt.sync();
      const { loopNs, completionNs } = await completion(iters, captureStacks, mesh);
      best = {
        recordNs: Math.min(best.recordNs, recordNs),
        loopNs: Math.min(best.loopNs, loopNs),
        completionNs: Math.min(best.completionNs, completionNs),
      };
    }
    rows.push({
      bench: 'overhead',
      side: 'dtorch',
      device,
      op: 'add_scalar',
      shape: [1],
      iters,
      capture_stacks: captureStacks,
      record_ns: +best.recordNs.toFixed(1),
      loop_ns: +best.loopNs.toFixed(1),
      completion_ns: +best.completionNs.toFixed(1),
    });
  }
  // on a GPU the loop's segments are replayed as CUDA graphs: how many, over every pass
  const graphs = dt.graph.stats();
  for (const row of rows) Object.assign(row, { graph_replays: graphs.replays, graph_replayed_kernels: graphs.replayedKernels, reused_lowerings: graphs.reusedLowerings });
  dt.setCaptureStacks(true);
  return rows;
}
