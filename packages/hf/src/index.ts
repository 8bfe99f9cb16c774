// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
// @dtorch/hf: HuggingFace models on DTorch (`import * as hf from '@dtorch/hf'`): configs read
// from config.json, fromPretrained from a local folder or the hub (through the HF cache), the
// T5 and CLIP text encoders with transformers' keys and outputs, their tokenizers (HF's Rust
// tokenizers: Python's ids), and the diffusion models with diffusers' keys and outputs (SD3 and
// Flux transformers, AutoencoderKL, the flow-matching scheduler) and pipelines, on any mesh.
// Each folder's index.ts is its public face; a new model adds its folder, a line here and its
// entry in the registry.
export * from "./configs/index.js";
export * from "./loading/index.js";
export * from "./tokenizers/index.js";
export * from "./schedulers/index.js";
export { type Activation } from "./models/activations.js";
export * from "./models/t5/index.js";
export * from "./models/clip/index.js";
export * from "./models/autoencoder_kl/index.js";
export * from "./models/sd3/index.js";
export * from "./models/flux/index.js";
// the diffusion transformers' shared submodules (diffusers' embeddings.py, normalization.py, attention.py)
export * from "./models/embeddings/index.js";
export * from "./models/normalization/index.js";
export * from "./models/attention/index.js";
// how a model maps onto mesh dims, and what applies a plan (each model's plans are in its folder)
export { applyTpPlan, checkTpDivides, type TpPlan, type TpStyle } from "./parallel/tp_plan.js";
export { batchPlacements, batchInput, batchPlacementsOver } from "./parallel/batch.js";
export { joinSequence, splitSequence, gatherSequence, placeInputs, sequencePieces, type SequenceParallelPlan } from "./parallel/sequence_parallel.js";
export { parallelize, removeContextParallel, checkHeadsDivide, type ParallelPlan } from "./parallel/parallelize.js";
export { type ContextParallelPlan, type ModuleSplits, type InputSplit } from "./parallel/context_parallel.js";
export { pieceByPieceJoin, ulyssesHeadsJoin, type JointAttention, type HasJointAttention } from "./parallel/joint_attention.js";
export * from "./pipelines/index.js";
// images in, for image-to-image and inpainting (the output side is in pipelines/image_output.ts)
export * from "./images/index.js";
export * from "./lora/index.js";
// offloading: models and blocks in host memory while they do not run (diffusers' enable_model_cpu_offload, apply_group_offloading)
export * from "./offload/index.js";
// step caching (diffusers' cache hooks: First-Block Cache)
export * from "./cache/index.js";
export { registry, type RegisteredModel, type TinyPipeline, type TinyPipelineOptions, type TrainedPipeline, type TrainedPipelineDefaults } from "./registry.js";
export * as nn from "@dtorch/nn";
// the image service (`dtorch serve`)
export * from "./serve/index.js";
