// FLUX.1-dev's transformer as the benchmarks run one step of it (models.json's "flux-dev"; size
// 'tiny': its tiny config and inputs): the step's inputs made on the device (random_init's noise,
// the image tokens' ids of an h x w grid, text ids zero), and for lora.mjs and fp8_step.mjs the
// model itself, random weights made on the device, projections packed and compiled.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { fillLikeTorchInit, noise } from './random_init.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** The latents x [b, h·w, in_channels] and the call's options of one step of a Flux transformer of `config` with models.json's `inputs`. */
export function fluxStepInputs(config, inputs, mesh, dtype) {
  const { batch: b, height: h, width: w, text_tokens: t } = inputs;
  const r = (shape, seed) => dt.tidy(() => noise(shape, mesh, 9000 + seed).mul(2).to(dtype));
  const f32 = { mesh, dtype: 'float32' };
  const ids = new Float32Array(h * w * 3);
  for (let i = 0; i < h * w; i++) [ids[3 * i + 1], ids[3 * i + 2]] = [Math.floor(i / w), i % w];
  const options = {
    encoderHiddenStates: r([b, t, config.joint_attention_dim], 2),
    pooledProjections: r([b, config.pooled_projection_dim], 3),
    timestep: dt.full([b], inputs.timestep, f32),
    ...(config.guidance_embeds ? { guidance: dt.full([b], inputs.guidance, f32) } : {}),
    imgIds: dt.fromBuffer(new Uint8Array(ids.buffer), 'float32', [h * w, 3], { mesh }),
    txtIds: dt.zeros([t, 3], f32),
  };
  return { x: r([b, h * w, config.in_channels], 1), options };
}

/** FLUX.1-dev's transformer on one `device` in `dtype` (compiled, as a pipeline runs it), its config and models.json's inputs, and one step's inputs. */
export function fluxStepModel({ device, size, dtype }) {
  const spec = JSON.parse(readFileSync(join(here, 'models.json'), 'utf8'))['flux-dev'];
  const config = { ...spec.config, ...(size === 'tiny' ? spec.tiny.config : {}) };
  const inputs = { ...spec.inputs, ...(size === 'tiny' ? spec.tiny.inputs : {}) };
  const mesh = new dt.DeviceMesh(device, [0]);
  const model = nn.skipInit(() => new hf.FluxTransformer2DModel(hf.FluxTransformer2DConfig.fromDict(config), { mesh, dtype }));
  fillLikeTorchInit(model);
  model.packProjections();
  model.compile();
  return { config, inputs, mesh, model, ...fluxStepInputs(config, inputs, mesh, dtype) };
}
