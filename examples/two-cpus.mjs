#!/usr/bin/env node
// The built-in default job: a small two-layer MLP run on a mesh of 2 CPU devices (one worker
// thread each), checked against the same program on 1 device. Prints the result.
//   npm run example
import * as dt from '@dtorch/api';

function mlp(mesh) {
  return dt.tidy(() => {
    const x = dt.randn([4, 8], { seed: 0, mesh });
    const w1 = dt.randn([8, 16], { seed: 1, mesh }).div(Math.sqrt(8));
    const w2 = dt.randn([16, 3], { seed: 2, mesh }).div(Math.sqrt(16));
    return x.matmul(w1).relu().matmul(w2);
  });
}

const mesh = new dt.DeviceMesh('cpu', [0, 1]);
const y = mlp(mesh);
console.log(`DTorch on ${mesh} (${dt.describeRuntime().split('\n')[0]})`);
console.log(`${y}`);
console.log(await y.array());

const reference = mlp(new dt.DeviceMesh('cpu', [2]));
const [a, b] = [await y.data(), await reference.data()];
const same = a.every((v, i) => v === b[i]);
console.log(`same values as on 1 device: ${same}`);
const { numTensors, perDevice } = dt.memory();
console.log(`live tensors: ${numTensors}; per device: ${perDevice.map((d) => `${d.device} ${d.allocatedBytes} B`).join(', ')}`);
if (!same) process.exit(1);
