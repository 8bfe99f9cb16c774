// What the built-in tiny pipelines share: their spec files (assets/tiny-pipelines/<name>.json,
// the one source of configs and weight seeds that tools/reference's fixture scripts read too) and
// how a component is made from one (built, then filled by fillRandomWeights from its seed).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as nn from '@dtorch/nn';
import type { JsonObject } from '../../configs/config_file.js';
import { PreTrainedModel } from '../../loading/pretrained_model.js';
import { fillRandomWeights } from '../random_weights.js';
import type { TinyTokenizerName } from './tiny_tokenizers.js';

/** A tiny pipeline's spec: model_index.json's entries, the weight seeds, the tokenizers, each component's config. */
export interface TinyPipelineSpec {
  /** The pipeline's model_index.json. */
  model_index: JsonObject;
  /** Component name (transformer, text_encoder, ...) to the seed of its random weights. */
  seeds: Record<string, number>;
  /** Tokenizer component name (tokenizer, tokenizer_2, ...) to the built-in tokenizer it is. */
  tokenizers: Record<string, TinyTokenizerName>;
  [component: string]: JsonObject;
}

/** The spec of tiny pipeline `name` (assets/tiny-pipelines/<name>.json). */
export function tinyPipelineSpec(name: string): TinyPipelineSpec {
  const path = fileURLToPath(new URL(`../../../assets/tiny-pipelines/${name}.json`, import.meta.url));
  return JSON.parse(readFileSync(path, 'utf8')) as TinyPipelineSpec;
}

/**
 * `make`'s model filled from `seed`: built without initial values (skipInit) unless `initialize`
 * (a model whose buffers are computed only at construction, as SD3's pos_embed table).
 */
export function randomModel<M extends nn.Module>(make: () => M, seed: number, { initialize = false } = {}): M {
  const model = initialize ? make() : nn.skipInit(make);
  fillRandomWeights(model, seed);
  if (model instanceof PreTrainedModel) model.packProjections(); // as fromPretrained leaves a model
  return model;
}
