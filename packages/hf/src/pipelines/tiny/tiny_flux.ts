// The built-in tiny-flux: every component of a FluxPipeline at a tiny size, made on the spot
// (no download) from assets/tiny-pipelines/tiny-flux.json, the one source of its configs and
// weight seeds that tools/reference/make_flux_pipeline_fixtures.py reads too. Weights from
// fillRandomWeights (random: the images are noise-like, the shapes and the code paths are
// FLUX.1-dev's); tokenizers the real CLIP BPE and a small T5 SentencePiece (tinyTokenizer).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { AutoencoderKLConfig } from '../../models/autoencoder_kl/autoencoder_kl_config.js';
import { CLIPTextConfig } from '../../models/clip/clip_text_config.js';
import { FluxTransformer2DConfig } from '../../models/flux/flux_transformer_config.js';
import { T5Config } from '../../models/t5/t5_config.js';
import { AutoencoderKL } from '../../models/autoencoder_kl/autoencoder_kl.js';
import { CLIPTextModel } from '../../models/clip/clip_text_model.js';
import { FluxTransformer2DModel } from '../../models/flux/flux_transformer_2d_model.js';
import { T5EncoderModel } from '../../models/t5/t5_encoder_model.js';
import { FlowMatchEulerDiscreteScheduler } from '../../schedulers/index.js';
import { randomModel, tinyPipelineSpec } from './tiny_spec.js';
import { tinyTokenizer } from './tiny_tokenizers.js';

/** tiny-flux's components on `mesh` (text encoders on `textEncoderMesh`) in `dtype`. */
export async function tinyFluxComponents(mesh: dt.DeviceMesh, textEncoderMesh: dt.DeviceMesh, dtype: dt.DType | undefined) {
  const spec = tinyPipelineSpec('tiny-flux');
  const config = (name: string) => spec[name]!;
  const seed = (name: string) => spec.seeds[name]!;
  const [tokenizer, tokenizer2] = await Promise.all([tinyTokenizer(spec.tokenizers['tokenizer']!), tinyTokenizer(spec.tokenizers['tokenizer_2']!)]);
  const parts: nn.Module[] = [];
  try {
    const textEncoder = randomModel(() => new CLIPTextModel(CLIPTextConfig.fromDict(config('text_encoder')), { mesh: textEncoderMesh, dtype }), seed('text_encoder'));
    parts.push(textEncoder);
    const textEncoder2 = randomModel(() => new T5EncoderModel(T5Config.fromDict(config('text_encoder_2')), { mesh: textEncoderMesh, dtype }), seed('text_encoder_2'));
    parts.push(textEncoder2);
    const transformer = randomModel(() => new FluxTransformer2DModel(FluxTransformer2DConfig.fromDict(config('transformer')), { mesh, dtype }), seed('transformer'));
    parts.push(transformer);
    const vae = randomModel(() => new AutoencoderKL(AutoencoderKLConfig.fromDict(config('vae')), { mesh, dtype }), seed('vae'));
    parts.push(vae);
    const scheduler = FlowMatchEulerDiscreteScheduler.fromConfig(config('scheduler'));
    return { scheduler, textEncoder, tokenizer, textEncoder2, tokenizer2, transformer, vae };
  } catch (err) {
    for (const part of parts) part.dispose();
    throw err;
  }
}
