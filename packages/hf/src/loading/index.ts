// fromPretrained: the base of every model, and the options that say where its files are.
export { PreTrainedModel, type ModelOptions, type PretrainedModelClass } from './pretrained_model.js';
export { type FromPretrainedOptions, type SourceOptions } from './options.js';
// fromSingleFile: a model from one checkpoint file in its original layout (BFL's Flux, SD3's MMDiT).
export { type FromSingleFileOptions } from './single_file/from_single_file.js';
export { fluxSingleFileConfig } from './single_file/flux_single_file.js';
export { sd3SingleFileConfig } from './single_file/sd3_single_file.js';
