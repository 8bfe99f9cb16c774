#!/usr/bin/env node
// A long loop whose memory stays flat: each step's intermediates are freed by tidy(), the previous
// state by dispose(), and the engine frees each buffer once no queued kernel still reads it.
// @dtorch/core's engine() is what dt.memory() and dt.sync() call.
//   node examples/memory.mjs
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';

const mesh = new dt.DeviceMesh('cpu', [0, 1]);
let x = dt.zeros([256, 256], { mesh, placements: [dt.Shard(0)] });
for (let step = 1; step <= 300; step++) {
  const next = dt.tidy(() => x.mul(0.5).add(1)); // x / 2 + 1, converging to 2
  x.dispose();
  x = next;
  if (step % 100 === 0) {
    await engine().sync(); // waits for every op recorded so far
    const { numTensors, perDevice } = engine().memory();
    console.log(`step ${step}: ${numTensors} live tensor(s), ${perDevice.map((d) => `${d.device} ${d.allocatedBytes} B`).join(', ')}`);
  }
}
console.log('x[0][0] =', (await x.data())[0]);
x.dispose();
