#!/usr/bin/env node
// A first distributed program: a small two-layer MLP on a mesh of 2 CPU devices (one worker thread
// each). The batch is sharded over the devices (Shard(0)), the weights replicated; the result
// stays sharded until it is read, and must match the same program on 1 device (to float32
// rounding: BLAS may sum a 3-row and a 6-row product in different orders).
//   npm run example:mlp
import * as dt from '@dtorch/api';

function mlp(mesh, batchPlacement) {
  return dt.tidy(() => {
    const x = dt.randn([6, 8], { seed: 0, mesh, placements: [batchPlacement] });
    const w1 = dt.randn([8, 16], { seed: 1, mesh }).div(Math.sqrt(8));
    const w2 = dt.randn([16, 3], { seed: 2, mesh }).div(Math.sqrt(16));
    return x.matmul(w1).relu().matmul(w2);
  });
}

const mesh = new dt.DeviceMesh('cpu', [0, 1]);
const y = mlp(mesh, dt.Shard(0));
console.log(`${dt.describeRuntime().split('\n')[0]}; the MLP runs on ${mesh}`);
console.log(dt.visualizeSharding(y));
console.log(await y.array());

// the same program on 1 device, a third CPU device (cpu:2) so that it runs beside the mesh
const reference = mlp(new dt.DeviceMesh('cpu', [2]), dt.Replicate());
const [a, b] = [await y.data(), await reference.data()];
const maxDiff = Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])));
const same = maxDiff <= 1e-5;
console.log(`matches 1 device: ${same} (max difference ${maxDiff.toExponential(2)})`);
const { numTensors, perDevice } = dt.memory();
console.log(`live tensors: ${numTensors} (y, a row block on each of cpu:0 and cpu:1, and the reference on cpu:2)`);
console.log(`bytes held: ${perDevice.map((d) => `${d.device} ${d.allocatedBytes}`).join(', ')}`);
if (!same) process.exit(1);
