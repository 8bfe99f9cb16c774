#!/usr/bin/env node
// Tensors on a mesh of 2 CPU devices: ops record at once (shape, dtype and placements are known
// on the spot), run later on a worker thread per device, and reading a value waits for it.
//   node examples/tensors.mjs
import * as dt from '@dtorch/api';

const mesh = new dt.DeviceMesh('cpu', [0, 1]);                             // 2 CPU devices, a worker thread each
const x = dt.randn([4, 8], { seed: 0, mesh, placements: [dt.Shard(0)] });  // rows split over the devices
// tidy() frees what is made inside it (the ones, the product before relu) except what it returns
const y = dt.tidy(() => x.matmul(dt.ones([8, 3], { mesh })).relu());        // still sharded by rows
console.log(y.shape, y.placements.map(String));                            // [ 4, 3 ] [ 'S(0)' ]
console.log(await y.array());                                              // waits for the value

const total = dt.tidy(() => y.mul(2).add(1).sum());                        // a 0-d tensor

console.log('sum:', await total.item());
dt.dispose([x, y, total]);
console.log('live tensors:', dt.memory().numTensors);                      // 0: everything freed
