// Reading HF config files: JSON with one error form for a bad key, and the base of every model's
// typed config (each model's own lives in its folder).
export { ConfigReader, readJsonFile, type Json, type JsonObject } from './config_file.js';
export { PretrainedConfig } from './pretrained_config.js';
