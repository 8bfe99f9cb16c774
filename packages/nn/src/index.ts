// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
// @dtorch/nn: Module and layers, tensor-parallel layers, and state dicts that load from
// safetensors files with each rank reading only its own slice (`import * as nn from '@dtorch/nn'`).
export { Module } from './module.js';
export { type ForwardAroundHook, type ForwardHook, type ForwardPreHook, type RemovableHandle } from './forward_hooks.js';
export { Parameter } from './parameter.js';
export { skipInit, initSkipped, type SkipInitOptions } from './init.js';
export { ModuleList } from './module_list.js';
export { Sequential } from './sequential.js';
export { Linear, linearProduct, rowAmax, type LinearOptions, type LinearLayout } from './layers/linear.js';
export { floatWeight, linearDtype, quantizeFp8, quantizeLinearFp8, quantizeWeightFp8, type Fp8Weight, type QuantizeFp8Options } from './quantization/fp8.js';
export { Embedding } from './layers/embedding.js';
export { LayerNorm, RMSNorm, GroupNorm, type NormOptions, type GroupNormOptions } from './layers/normalization.js';
// Pair: the one-number-or-[h, w] sizes of Conv2d (kernelSize, stride, padding, dilation).
export { Conv2d, type Conv2dOptions, type Pair } from './layers/conv.js';
export { SiLU, GELU, ReLU } from './layers/activation.js';
export { Dropout } from './layers/dropout.js';
export {
  ColumnParallelLinear,
  ColumnParallelLinearWithReplicateInputOutput,
  RowParallelLinear,
  RowParallelLinearWithReplicateOutput,
  RowParallelLinearWithSequenceParallelOutput,
  ReplicateParallelLinear,
} from './parallel/linear.js';
export { ColumnParallelEmbedding, EmbeddingWithReplicateOutput } from './parallel/embedding.js';
export { tpDim, onTpDim, toTp } from './parallel/tp_dim.js';
export { type LayerOptions } from './layer_options.js';
export { type StateDictSource, type LoadStateDictOptions, type LoadStateDictResult } from './state_dict.js';
export { saveSafetensors, tensorBytes } from './save_safetensors.js';
export { sliceRuns } from './slice_runs.js';
export { fromSafetensorsDtype, toSafetensorsDtype } from './dtypes.js';
export { LinearLora, linearLora, loraDelta, loraJoin, loraLinear, loraWideProduct, shareLoraJoin, checkLoraFits, type LoraShape, type RunningAdapter, type TallLora } from './lora/linear_lora.js';
export { packLoraFactors, packedLoraKey, type PackedLoraFactors } from './lora/packed_lora.js';
export {
  addLoraAdapter,
  loraAdapterNames,
  activeLoraWeights,
  setLoraAdapters,
  enableLora,
  loraEnabled,
  deleteLoraAdapter,
  fuseLora,
  unfuseLora,
  loraFused,
  unloadLora,
  disposeLora,
  type LoraWeights,
} from './lora/model_lora.js';
