// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
// @dtorch/hf: HuggingFace models on DTorch (`import * as hf from '@dtorch/hf'`): configs read
// from config.json, fromPretrained from a local folder or the hub (through the HF cache), the
// T5 and CLIP text encoders with transformers' keys and outputs, their tokenizers (HF's Rust
// tokenizers: Python's ids), and the diffusion models with diffusers' keys and outputs (SD3 and
// Flux transformers, AutoencoderKL, the flow-matching scheduler), on any mesh.
export {
  ConfigReader,
  readJsonFile,
  type Json,
  type JsonObject,
} from "./configs/config_file.js";
export { PretrainedConfig } from "./configs/pretrained_config.js";
export { T5Config } from "./models/t5/t5_config.js";
export { CLIPTextConfig } from "./models/clip/clip_text_config.js";
export {
  PreTrainedModel,
  type ModelOptions,
  type PretrainedModelClass,
} from "./loading/pretrained_model.js";
export {
  type FromPretrainedOptions,
  type SourceOptions,
} from "./loading/options.js";
export {
  AutoTokenizer,
  PreTrainedTokenizer,
  type BatchEncoding,
  type DecodeOptions,
  type EncodeOptions,
  type BackendTokenizer,
  type BackendEncoding,
  type BackendPadding,
} from "./tokenizers/index.js";
// the padding and truncation side of PreTrainedTokenizer
export { type Side } from "./tokenizers/tokenizer_config.js";
export {
  applyTpPlan,
  checkTpDivides,
  type TpPlan,
  type TpStyle,
} from "./parallel/tp_plan.js";
export { batchPlacements, batchInput } from "./parallel/batch.js";
export {
  T5EncoderModel,
  T5Stack,
  type T5EncoderOutput,
} from "./models/t5/t5_encoder_model.js";
// T5's submodules, named and nested as the checkpoint's keys (encoder.block.N.layer.M.*).
export { T5Block, T5LayerSelfAttention } from "./models/t5/t5_block.js";
export { T5Attention } from "./models/t5/t5_attention.js";
export { T5LayerFF, T5DenseActDense, T5DenseGatedActDense } from "./models/t5/t5_feed_forward.js";
export { T5LayerNorm } from "./models/t5/t5_layer_norm.js";
export { type Activation } from "./models/activations.js";
export {
  CLIPTextModel,
  CLIPTextModelWithProjection,
  CLIPTextTransformer,
  type CLIPTextCallOptions,
  type CLIPTextOutput,
  type CLIPTextWithProjectionOutput,
} from "./models/clip/clip_text_model.js";
// CLIP's submodules, named and nested as the checkpoint's keys (text_model.*).
export { CLIPTextEmbeddings } from "./models/clip/clip_text_model.js";
export { CLIPEncoder, CLIPEncoderLayer, CLIPMLP } from "./models/clip/clip_encoder.js";
export { CLIPAttention } from "./models/clip/clip_attention.js";
export { AutoencoderKLConfig } from "./models/autoencoder_kl/autoencoder_kl_config.js";
export {
  AutoencoderKL,
  type AutoencoderKLTilingOptions,
} from "./models/autoencoder_kl/autoencoder_kl.js";
export { type DiagonalGaussianDistribution } from "./models/autoencoder_kl/diagonal_gaussian.js";
// AutoencoderKL's submodules, named and nested as the checkpoint's keys (encoder.*, decoder.*).
export { Encoder, Decoder } from "./models/autoencoder_kl/vae.js";
export { DownEncoderBlock2D, UpDecoderBlock2D, UNetMidBlock2D, type BlockSettings } from "./models/autoencoder_kl/blocks.js";
export { ResnetBlock2D } from "./models/autoencoder_kl/resnet_block_2d.js";
export { Downsample2D, Upsample2D } from "./models/autoencoder_kl/sampling.js";
export { VAEAttention } from "./models/autoencoder_kl/vae_attention.js";
export {
  SD3Transformer2DConfig,
  type SD3QkNorm,
} from "./models/sd3/sd3_transformer_config.js";
export { sd3QkNorms } from "./models/sd3/sd3_transformer_config.js";
export {
  SD3Transformer2DModel,
  type SD3TransformerCallOptions,
} from "./models/sd3/sd3_transformer_2d_model.js";
// SD3's submodules, named and nested as the checkpoint's keys (pos_embed.*, transformer_blocks.N.*).
export { PatchEmbed } from "./models/sd3/patch_embed.js";
export { JointTransformerBlock, type JointBlockOptions } from "./models/sd3/joint_transformer_block.js";
export { SD3Attention, type SD3AttentionOptions } from "./models/sd3/joint_attention.js";
export { SD35AdaLayerNormZeroX } from "./models/sd3/sd35_ada_layer_norm_zero_x.js";
export {
  FlowMatchEulerDiscreteScheduler,
  FlowMatchEulerDiscreteConfig,
  calculateShift,
  type FlowMatchEulerDiscreteSchedulerOutput,
  type SchedulerStepOptions,
  type SetTimestepsOptions,
  type TimeShiftType,
} from "./schedulers/index.js";
export { FluxTransformer2DConfig } from "./models/flux/flux_transformer_config.js";
export {
  FluxTransformer2DModel,
  type FluxTransformerCallOptions,
} from "./models/flux/flux_transformer_2d_model.js";
// Flux's submodules, named and nested as the checkpoint's keys (transformer_blocks.N.*, single_transformer_blocks.N.*).
export { FluxTransformerBlock } from "./models/flux/flux_transformer_block.js";
export { FluxSingleTransformerBlock } from "./models/flux/flux_single_transformer_block.js";
export { FluxAttention, type FluxAttentionOptions, type RotaryTables } from "./models/flux/flux_attention.js";
// The diffusion transformers' shared submodules (diffusers' embeddings.py, normalization.py, attention.py).
export { CombinedTimestepTextProjEmbeddings, CombinedTimestepGuidanceTextProjEmbeddings } from "./models/embeddings/combined_timestep_embeddings.js";
export { TimestepEmbedding } from "./models/embeddings/timestep_embedding.js";
export { PixArtAlphaTextProjection } from "./models/embeddings/text_projection.js";
export {
  AdaLayerNormChunks,
  AdaLayerNormZero,
  AdaLayerNormZeroSingle,
  AdaLayerNormContinuous,
  type AdaLayerNormContinuousOptions,
} from "./models/normalization/ada_layer_norm.js";
export { FeedForward, GELUProjection, type FeedForwardOptions } from "./models/attention/feed_forward.js";
export { PackedProjections, hasPackedProjections, type HasPackedProjections } from "./models/attention/packed_projections.js";
export {
  joinSequence,
  splitSequence,
  gatherSequence,
  placeInputs,
  sequencePieces,
  type SequenceParallelPlan,
} from "./parallel/sequence_parallel.js";
// how each model maps onto mesh dims (data in its folder), and what applies it
export { t5TpPlan, t5ParallelPlan } from "./models/t5/t5_plans.js";
export { clipTpPlan, clipParallelPlan } from "./models/clip/clip_plans.js";
export { sd3TpPlan, sd3ContextParallelPlan, sd3ParallelPlan } from "./models/sd3/sd3_plans.js";
export { fluxTpPlan, fluxContextParallelPlan, fluxParallelPlan, fluxSequenceParallelPlan } from "./models/flux/flux_plans.js";
export { parallelize, removeContextParallel, checkHeadsDivide, type ParallelPlan } from "./parallel/parallelize.js";
export { type ContextParallelPlan, type ModuleSplits, type InputSplit } from "./parallel/context_parallel.js";
export { pieceByPieceJoin, ulyssesHeadsJoin, type JointAttention, type HasJointAttention } from "./parallel/joint_attention.js";
export { FluxPosEmbed } from "./models/embeddings/rotary_pos_embed.js";
export * as nn from "@dtorch/nn";
export {
  registry,
  type RegisteredModel,
  type RegisteredModelName,
  type RegisteredSchedulerName,
  type TinyPipeline,
  type TinyPipelineOptions,
} from "./registry.js";
export {
  DiffusionPipeline,
  registerPipeline,
  type GenerateOptions,
  type GenerateOutput,
  type PipelineClass,
  type PipelineOptions,
  type StepInfo,
} from "./pipelines/diffusion_pipeline.js";
export { readModelIndex, type ModelIndex } from "./pipelines/model_index.js";
export { denormalize, toPngs, outputTypes, type OutputType } from "./pipelines/image_output.js";
export { fillRandomWeights } from "./pipelines/random_weights.js";
export { tinyTokenizer, tinyTokenizerFolder, type TinyTokenizerName } from "./pipelines/tiny/tiny_tokenizers.js";
export {
  FluxPipeline,
  type FluxGenerateOptions,
  type FluxPipelineComponents,
  type FluxPipelineInit,
} from "./pipelines/flux/flux_pipeline.js";
export { type FluxEncodePromptOptions, type FluxPromptEmbeds } from "./pipelines/flux/flux_prompt.js";
export { packLatents, unpackLatents, latentImageIds } from "./pipelines/flux/flux_latents.js";
export {
  StableDiffusion3Pipeline,
  type SD3GenerateOptions,
  type StableDiffusion3Components,
} from "./pipelines/sd3/sd3_pipeline.js";
// SD3's prompt encoding: its options, result and text encoders, and Prompt (one prompt or a list)
export { type Prompt, type SD3EncodePromptOptions, type SD3PromptEmbeds, type SD3TextEncoders } from "./pipelines/sd3/sd3_prompt.js";
export { tinySD3Components, type TinySD3Options } from "./pipelines/sd3/sd3_pipeline.js";
export { tinyPipelineSpec, randomModel, type TinyPipelineSpec } from "./pipelines/tiny/tiny_spec.js";
export { batchPlacementsOver } from "./parallel/batch.js";
