// Compiled by the packaging test with tsc --strict in a fresh project (tsconfig.json beside it:
// no `types`, no `lib`), then run: the published declarations must be enough on their own.
import { writeFileSync } from 'node:fs';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import * as hf from '@dtorch/hf';

const mesh: dt.DeviceMesh = new dt.DeviceMesh('cpu', [0, 1], ['ulysses']);
const layer: nn.Linear = new nn.Linear(8, 3, { mesh });
let rows: number;
{
  using x = dt.randn([4, 8], { seed: 0, mesh, placements: [dt.Shard(0)] }); // Tensor is Disposable
  using y: dt.Tensor = layer.forward(x);
  const values = (await y.array()) as number[][];
  rows = values.length;
}

let code: string | undefined;
try {
  dt.zeros([-1]);
} catch (err) {
  if (dt.isDTorchError(err)) code = err.code;
}

const pipe: hf.FluxPipeline = await hf.FluxPipeline.tiny({ mesh });
const call = { prompt: 'a cat', height: 64, width: 64, numInferenceSteps: 2, seed: 0 } satisfies hf.FluxGenerateOptions;
const { images } = await pipe.generate(call); // PNG files by default: Buffer[]
const png: Buffer = images[0]!;
writeFileSync('consumer.png', png);
const { images: latents } = await pipe.generate({ ...call, outputType: 'latent' }); // a Tensor
const latentShape: readonly number[] = latents.shape;
latents.dispose();
pipe.dispose();
console.log(JSON.stringify({ rows, code, pngBytes: png.length, latentShape }));
