// The built-in tiny-sd3: every component of a StableDiffusion3Pipeline at a tiny size, made on
// the spot (no download) from assets/tiny-pipelines/tiny-sd3.json, the one source of its
// configs and weight seeds that tools/reference/make_sd3_pipeline_fixtures.py reads too. Weights
// from fillRandomWeights (random: the images are noise-like, the code paths SD3-medium's: two
// CLIPs with projection, a T5, the MMDiT, a 16-channel VAE with SD3's scaling and shift, the
// scheduler with shift 3.0); tokenizers the real CLIP BPE and a small T5 SentencePiece.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { AutoencoderKLConfig } from '../../models/autoencoder_kl/autoencoder_kl_config.js';
import { CLIPTextConfig } from '../../models/clip/clip_text_config.js';
import { SD3Transformer2DConfig } from '../../models/sd3/sd3_transformer_config.js';
import { T5Config } from '../../models/t5/t5_config.js';
import { AutoencoderKL } from '../../models/autoencoder_kl/autoencoder_kl.js';
import { CLIPTextModelWithProjection } from '../../models/clip/clip_text_model.js';
import { SD3Transformer2DModel } from '../../models/sd3/sd3_transformer_2d_model.js';
import { T5EncoderModel } from '../../models/t5/t5_encoder_model.js';
import { FlowMatchEulerDiscreteScheduler } from '../../schedulers/flow_match_euler_discrete_scheduler.js';
import { randomModel, tinyPipelineSpec } from './tiny_spec.js';
import { tinyTokenizer } from './tiny_tokenizers.js';

/** Where tiny-sd3 lives: the transformer and VAE on `mesh`, the text encoders on `textEncoderMesh` (default `mesh`). */
export interface TinySD3Options {
  /** The mesh of the transformer and the VAE (default the default mesh). */
  mesh?: dt.DeviceMesh;
  /** The text encoders' mesh (default `mesh`). */
  textEncoderMesh?: dt.DeviceMesh;
  /** The parameters' dtype (default float32). */
  dtype?: dt.DType;
}

/** tiny-sd3's components, as StableDiffusion3Pipeline's constructor takes them. */
export async function tinySD3Components(options: TinySD3Options = {}) {
  const spec = tinyPipelineSpec('tiny-sd3');
  const config = (name: string) => spec[name]!;
  const mesh = options.mesh ?? dt.defaultMesh();
  const textMesh = options.textEncoderMesh ?? mesh;
  const dtype = options.dtype;
  const [tokenizer, tokenizer2, tokenizer3] = await Promise.all(['tokenizer', 'tokenizer_2', 'tokenizer_3'].map((name) => tinyTokenizer(spec.tokenizers[name]!)));
  const made: nn.Module[] = [];
  const random = <M extends nn.Module>(name: string, make: () => M, options?: { initialize?: boolean }): M => {
    const model = randomModel(make, spec.seeds[name]!, options);
    made.push(model);
    return model;
  };
  const o = (m: dt.DeviceMesh) => ({ mesh: m, ...(dtype ? { dtype } : {}) });
  try {
    return {
      /** The scheduler, from the spec's config (shift 3.0). */
      scheduler: FlowMatchEulerDiscreteScheduler.fromConfig(config('scheduler')),
      /** CLIP-L at a tiny size, on textEncoderMesh. */
      textEncoder: random('text_encoder', () => new CLIPTextModelWithProjection(CLIPTextConfig.fromDict(config('text_encoder')), o(textMesh))),
      /** The tiny CLIP tokenizer. */
      tokenizer: tokenizer!,
      /** CLIP-G at a tiny size, on textEncoderMesh. */
      textEncoder2: random('text_encoder_2', () => new CLIPTextModelWithProjection(CLIPTextConfig.fromDict(config('text_encoder_2')), o(textMesh))),
      /** The tiny CLIP tokenizer. */
      tokenizer2: tokenizer2!,
      /** A tiny T5 encoder, on textEncoderMesh. */
      textEncoder3: random('text_encoder_3', () => new T5EncoderModel(T5Config.fromDict(config('text_encoder_3')), o(textMesh))),
      /** The tiny T5 tokenizer. */
      tokenizer3: tokenizer3!,
      /** The MMDiT at a tiny size, on `mesh`. */
      transformer: random('transformer', () => new SD3Transformer2DModel(SD3Transformer2DConfig.fromDict(config('transformer')), o(mesh)), { initialize: true }),
      /** A tiny 16-channel VAE with SD3's scaling and shift, on `mesh`. */
      vae: random('vae', () => new AutoencoderKL(AutoencoderKLConfig.fromDict(config('vae')), o(mesh))),
    };
  } catch (err) {
    for (const m of made) m.dispose();
    throw err;
  }
}
