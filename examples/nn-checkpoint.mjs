#!/usr/bin/env node
// A PyTorch checkpoint loaded into @dtorch/nn on a mesh of 4 CPU devices, 2 x 2 ('dp' x 'tp'):
// the batch splits over 'dp', the layers over 'tp' (fc1's output features, fc2's input features),
// and each device reads only its own slice of the file. The checkpoint and PyTorch's output for
// the input come from tools/reference/make_example_checkpoint.py (examples/assets/).
//   node examples/nn-checkpoint.mjs
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

// the same module tree as the PyTorch MLP: property names are the state-dict keys (fc1.weight, ...)
class MLP extends nn.Module {
  constructor(mesh) {
    super();
    this.fc1 = new nn.ColumnParallelLinear(8, 16, { mesh });                   // weight Shard(0) over 'tp'
    this.act = new nn.GELU();
    this.fc2 = new nn.RowParallelLinearWithReplicateOutput(16, 3, { mesh });   // weight Shard(1), one all-reduce
  }
  forward(x) {
    return this.fc2.forward(this.act.forward(this.fc1.forward(x)));
  }
}

const asset = (name) => fileURLToPath(new URL(`assets/${name}`, import.meta.url)); // beside this file, from any directory
const io = JSON.parse(readFileSync(asset('mlp-io.json'), 'utf8'));

const mesh = dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']);
const model = new MLP(mesh);
const { bytesRead } = await model.loadStateDict(asset('mlp.safetensors'));
console.log(`loaded ${bytesRead} bytes of parameters on ${mesh}`);
console.log(model.toString());

const x = dt.tensor(io.input, { mesh, placements: [dt.Shard(0), dt.Replicate()] }); // rows over 'dp'
const y = model.call(x); // forward() inside tidy(): the intermediates are freed
const got = await y.array();
const maxDiff = Math.max(...got.flat().map((v, i) => Math.abs(v - io.output.flat()[i])));
console.log(`output ${JSON.stringify(y.shape)} ${y.placements.map(String).join(',')}; largest difference from PyTorch ${maxDiff.toExponential(1)}`);
if (maxDiff > 1e-5) process.exit(1);
