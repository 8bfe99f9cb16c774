// Run in the packaging test's fresh project: a linear layer of @dtorch/nn on a mesh of 2 CPU
// devices with the batch sharded, against the same layer on 1 device; prints what it saw as JSON.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

async function linear(mesh, placement) {
  const layer = new nn.Linear(8, 3, { mesh });
  await layer.loadStateDict({ weight: dt.arange(24, { mesh }).reshape([3, 8]).div(24), bias: dt.ones([3], { mesh }) });
  return layer.forward(dt.randn([4, 8], { seed: 0, mesh, placements: [placement] }));
}

const y = await linear(new dt.DeviceMesh('cpu', [0, 1]), dt.Shard(0));
const reference = await linear(new dt.DeviceMesh('cpu', [0]), dt.Replicate());
console.log(JSON.stringify({
  placements: y.placements.map(String),
  workers: dt.workers().map((w) => w.device),
  y: await y.array(),
  reference: await reference.array(),
}));
