// Compiled by the packaging test with tsc --strict in a fresh project (tsconfig.json beside it:
// no `types`, no `lib`, skipLibCheck off), then run: the published declarations of every package
// must be enough on their own, and compile.
import { writeFileSync } from 'node:fs';
import * as common from '@dtorch/common';
import * as external from '@dtorch/external';
import * as core from '@dtorch/core';
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

let code: common.ErrorCode | undefined;
try {
  dt.zeros([-1]);
} catch (err) {
  if (common.isDTorchError(err)) code = err.code;
}
const runtime: string = external.describeRuntime();
const float32: core.DTypeName = 'float32';
const tokenizer: hf.PreTrainedTokenizer = await hf.AutoTokenizer.fromPretrained(hf.tinyTokenizerFolder('clip'));
const { inputIds } = await tokenizer.encode('a cat');
const vocabulary: number = tokenizer.backendTokenizer.getVocabSize(true);

const pipe: hf.FluxPipeline = await hf.FluxPipeline.tiny({ mesh });
const call = { prompt: 'a cat', height: 64, width: 64, numInferenceSteps: 2, seed: 0 } satisfies hf.FluxGenerateOptions;
const { images } = await pipe.generate(call); // PNG files by default: Buffer[]
const png: Buffer = images[0]!;
writeFileSync('consumer.png', png);
const { images: latents } = await pipe.generate({ ...call, outputType: 'latent' }); // a Tensor
const latentShape: readonly number[] = latents.shape;
latents.dispose();
pipe.dispose();
console.log(JSON.stringify({ rows, code, pngBytes: png.length, latentShape, runtime: runtime.length > 0, dtype: float32, ids: inputIds[0]!.length, vocabulary }));
