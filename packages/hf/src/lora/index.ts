// LoRA adapters for the pipelines (diffusers' load_lora_weights and friends are DiffusionPipeline
// methods): reading a LoRA file, the shared layouts rewritten into diffusers' module paths, each
// module's alpha from the file's metadata.
export { readLoraFile, type LoraFile, type LoraTensor } from './lora_state_dict.js';
export { fluxLoraToDiffusers, detectLoraLayout, diffusersLayoutLora, type LoraLayout, type DiffusersLora, type ModuleLora } from './lora_formats.js';
export { sd3LoraToDiffusers } from './sd3_lora_formats.js';
export { fetchLoraFile, DEFAULT_LORA_WEIGHT_NAME } from './lora_source.js';
export { componentConfigs, moduleAlpha, type ComponentLoraConfig } from './lora_alpha.js';
export { type LoadLoraWeightsOptions, type LoraComponents } from './pipeline_lora.js';
