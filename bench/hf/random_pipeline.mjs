// A pipeline of bench/hf/pipelines.json at full size with random weights (random_init.mjs: values
// made on the device, no download), or at its tiny size (models.json's tiny configs with the
// entry's "tiny" overrides; "tiny_call" over "call"): what bench/hf/pipelines.mjs times and
// bench/serve/gpu_throughput.mjs serves. Tokenizers: the tiny pipelines' (with random weights the
// ids' meaning is moot; the padded lengths are the real ones).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { fillLikeTorchInit, fillLikeTransformersInit } from './random_init.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const models = JSON.parse(readFileSync(join(here, 'models.json'), 'utf8'));
const all = JSON.parse(readFileSync(join(here, 'pipelines.json'), 'utf8'));

/** pipelines.json's entries, each with its base's components and scheduler (a variant names its text-to-image base). */
export const pipelineSpecs = Object.fromEntries(Object.entries(all).filter(([name]) => !name.startsWith('_')).map(([name, spec]) => [name, spec.base ? { ...all[spec.base], ...spec } : spec]));

const classes = {
  FluxTransformer2DModel: [hf.FluxTransformer2DConfig, hf.FluxTransformer2DModel, fillLikeTorchInit],
  SD3Transformer2DModel: [hf.SD3Transformer2DConfig, hf.SD3Transformer2DModel, fillLikeTorchInit],
  AutoencoderKL: [hf.AutoencoderKLConfig, hf.AutoencoderKL, fillLikeTorchInit],
  T5EncoderModel: [hf.T5Config, hf.T5EncoderModel, fillLikeTransformersInit],
  CLIPTextModel: [hf.CLIPTextConfig, hf.CLIPTextModel, fillLikeTransformersInit],
  CLIPTextModelWithProjection: [hf.CLIPTextConfig, hf.CLIPTextModelWithProjection, fillLikeTransformersInit],
};

// One component of pipelines.json on `mesh` with random weights.
function component(entry, mesh, dtype, tiny) {
  const spec = models[entry.model];
  const config = { ...spec.config, ...entry.config, ...(tiny ? { ...spec.tiny?.config, ...entry.tiny } : {}) };
  const [Config, Model, fill] = classes[entry.class ?? spec.class];
  const model = nn.skipInit(() => new Model(Config.fromDict(config), { mesh, dtype }));
  fill(model);
  model.packProjections(); // as fromPretrained leaves a model: q, k and v in one matmul
  return model;
}

/**
 * Pipeline `name` of pipelines.json on `mesh` in `dtype` with random weights (tiny: its tiny
 * size), its transformer quantized when `quantize` names a kind (and its T5 encoder too with
 * `quantizeText`); and the entry's call settings.
 */
export async function randomPipeline(name, { mesh, dtype, tiny = false, quantize, quantizeText = false }) {
  const spec = pipelineSpecs[name];
  if (!spec) throw new Error(`random_pipeline: no pipeline "${name}" in pipelines.json (${Object.keys(pipelineSpecs).join(', ')})`);
  const c = spec.components;
  const parts = { scheduler: hf.FlowMatchEulerDiscreteScheduler.fromConfig(spec.scheduler), transformer: component(c.transformer, mesh, dtype, tiny), vae: component(c.vae, mesh, dtype, tiny) };
  if (quantize) parts.transformer.quantize(quantize);
  const keys = { text_encoder: ['textEncoder', 'tokenizer'], text_encoder_2: ['textEncoder2', 'tokenizer2'], text_encoder_3: ['textEncoder3', 'tokenizer3'] };
  for (const [key, [model, tokenizer]] of Object.entries(keys)) {
    if (!c[key]) continue;
    parts[model] = component(c[key], mesh, dtype, tiny);
    if (quantize && quantizeText && c[key].model.startsWith('t5')) parts[model].quantize(quantize);
    parts[tokenizer] = await hf.tinyTokenizer(c[key].tokenizer);
  }
  const pipe = new hf[spec.pipeline](parts);
  return { pipe, call: { ...spec.call, ...(tiny ? spec.tiny_call : {}) } };
}
