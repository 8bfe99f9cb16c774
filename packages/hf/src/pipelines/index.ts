// The pipelines: the base every one extends (DiffusionPipeline, its options and output), what a
// pipeline folder's model_index.json says, the image output, the built-in tiny pipelines' parts,
// and one folder per pipeline family.
export {
  DiffusionPipeline,
  registerPipeline,
  type CacheReport,
  type GenerateOptions,
  type GenerateOutput,
  type PipelineClass,
  type PipelineOptions,
  type StepInfo,
} from './diffusion_pipeline.js';
export { readModelIndex, type ModelIndex } from './model_index.js';
export { denormalize, toPngs, outputTypes, type OutputType } from './image_output.js';
export { fillRandomWeights } from './random_weights.js';
export { tinyPipelineSpec, randomModel, type TinyPipelineSpec } from './tiny/tiny_spec.js';
export { tinyTokenizer, tinyTokenizerFolder, type TinyTokenizerName } from './tiny/tiny_tokenizers.js';
export { type ImageToImageOptions } from './variants/image_to_image.js';
export { type InpaintOptions } from './variants/inpaint.js';
export * from './flux/index.js';
export * from './sd3/index.js';
