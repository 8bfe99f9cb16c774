// fromPretrained: the base of every model, and the options that say where its files are.
export { PreTrainedModel, type ModelOptions, type PretrainedModelClass } from './pretrained_model.js';
export { type FromPretrainedOptions, type SourceOptions } from './options.js';
