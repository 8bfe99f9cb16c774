// The classes DTorch loads by the names HF files give them, in one list: each model by the
// class name of its config.json and of model_index.json, the schedulers and tokenizers a
// model_index.json names, each pipeline by model_index.json's _class_name, and the built-in tiny
// pipelines (random weights, made on the spot) and trained ones (shipped weights, loaded from their
// folder) by the name `dtorch generate --model` takes. DiffusionPipeline.fromPretrained, the
// component loader, tiny(), the CLI, the docs and the tests read it: a new model adds its folder
// and one entry here. The pipelines are imported when first asked for: their modules load
// their components through this list, so importing them here would make a cycle.
import type * as dt from '@dtorch/api';
import type { JsonObject } from './configs/config_file.js';
import type { FromPretrainedOptions, Quantization } from './loading/options.js';
import type { ModelOptions, PreTrainedModel } from './loading/pretrained_model.js';
import { AutoencoderKL, AutoencoderKLConfig } from './models/autoencoder_kl/index.js';
import { CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection } from './models/clip/index.js';
import { FluxTransformer2DConfig, FluxTransformer2DModel } from './models/flux/index.js';
import { SD3Transformer2DConfig, SD3Transformer2DModel } from './models/sd3/index.js';
import { T5Config, T5EncoderModel } from './models/t5/index.js';
import type { DiffusionPipeline, PipelineClass } from './pipelines/diffusion_pipeline.js';
import { FlowMatchEulerDiscreteScheduler } from './schedulers/flow_match_euler_discrete_scheduler.js';

/** A model class as the registry holds it: the class, its config's class, how it is made at random. */
export interface RegisteredModel {
  /** The class: `new model(config, { mesh, dtype })`, or `model.fromPretrained(source, options)`. */
  readonly model: {
    /** The model of `config` (its config class's), its parameters on `options.mesh` in `options.dtype`. */
    new (config: never, options?: ModelOptions): PreTrainedModel;
    /** The model saved at `source` (PreTrainedModel.fromPretrained). */
    fromPretrained(source: string, options?: FromPretrainedOptions): Promise<PreTrainedModel>;
  };
  /** Its config, read from config.json's contents (as a tiny pipeline's spec holds them). */
  readonly config: {
    /** The config of config.json's contents `values`. */
    fromDict(values: JsonObject): unknown;
  };
  /**
   * Made at random (a tiny pipeline), built with its constructor's initial values rather than
   * none (nn.skipInit): a buffer computed only there (SD3's position table) must keep them.
   */
  readonly initialize?: boolean;
}

/** Where a built-in tiny pipeline lives (each part on its mesh) and its dtype. */
export interface TinyPipelineOptions {
  /** The mesh of the transformer and the VAE (default the default mesh). */
  mesh?: dt.DeviceMesh;
  /** The text encoders' mesh (default `mesh`). */
  textEncoderMesh?: dt.DeviceMesh;
  /** The parameters' dtype (default float32). */
  dtype?: dt.DType;
  /** As PipelineOptions.quantize: 'fp8' for the transformer, or per component. */
  quantize?: Quantization | Readonly<Record<string, Quantization>>;
}

/** A built-in tiny pipeline: the class it is, and how it is made (random weights, no download). */
export interface TinyPipeline {
  /** The pipeline class, as model_index.json's _class_name spells it. */
  readonly pipeline: string;
  /** The pipeline, made here (assets/tiny-pipelines/<name>.json: its configs and weight seeds). */
  make(options?: TinyPipelineOptions): Promise<DiffusionPipeline>;
}

/** The settings a built-in trained pipeline was trained for: what `dtorch generate` uses when not told. */
export interface TrainedPipelineDefaults {
  /** Width in pixels. */
  readonly width: number;
  /** Height in pixels. */
  readonly height: number;
  /** Denoising steps. */
  readonly numInferenceSteps: number;
  /** T5's padded length (FluxPipeline's maxSequenceLength). */
  readonly maxSequenceLength: number;
  /** The negative prompt of true classifier-free guidance. */
  readonly negativePrompt: string;
  /** True classifier-free guidance's scale (FluxPipeline's trueCfgScale). */
  readonly trueCfgScale: number;
}

/**
 * A built-in trained pipeline: shipped weights in diffusers' folder layout (assets/<name>, its model
 * card beside them), loaded through `DiffusionPipeline.fromPretrained(await folder())` as any saved
 * pipeline: nothing about it is special-cased.
 */
export interface TrainedPipeline {
  /** The pipeline class, as model_index.json's _class_name spells it. */
  readonly pipeline: string;
  /** What it is, in a line (the CLI prints it). */
  readonly about: string;
  /** The size and steps it was trained for. */
  readonly defaults: TrainedPipelineDefaults;
  /** Its pipeline folder, put together in the temporary folder at first use (weights and tokenizers). */
  folder(): Promise<string>;
}

/** The models, by the class name of their config.json (`_class_name`, or `architectures`) and of model_index.json. */
const models = {
  AutoencoderKL: { model: AutoencoderKL, config: AutoencoderKLConfig },
  CLIPTextModel: { model: CLIPTextModel, config: CLIPTextConfig },
  CLIPTextModelWithProjection: { model: CLIPTextModelWithProjection, config: CLIPTextConfig },
  FluxTransformer2DModel: { model: FluxTransformer2DModel, config: FluxTransformer2DConfig },
  SD3Transformer2DModel: { model: SD3Transformer2DModel, config: SD3Transformer2DConfig, initialize: true },
  T5EncoderModel: { model: T5EncoderModel, config: T5Config },
} as const satisfies Record<string, RegisteredModel>;

/** The schedulers, by the class name of model_index.json (and of scheduler_config.json's `_class_name`). */
const schedulers = {
  FlowMatchEulerDiscreteScheduler,
} as const;

/**
 * The tokenizer classes pipelines name in model_index.json. AutoTokenizer loads each (and any
 * other) from its folder, as the folder's own tokenizer_config.json says.
 */
const tokenizers = ['CLIPTokenizer', 'CLIPTokenizerFast', 'T5Tokenizer', 'T5TokenizerFast'] as const;

/** The pipelines, by model_index.json's _class_name. */
const pipelines = {
  FluxPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/flux/flux_pipeline.js')).FluxPipeline,
  StableDiffusion3Pipeline: async (): Promise<PipelineClass> => (await import('./pipelines/sd3/sd3_pipeline.js')).StableDiffusion3Pipeline,
  FluxImg2ImgPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/flux/flux_img2img_pipeline.js')).FluxImg2ImgPipeline,
  StableDiffusion3Img2ImgPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/sd3/sd3_img2img_pipeline.js')).StableDiffusion3Img2ImgPipeline,
  FluxInpaintPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/flux/flux_inpaint_pipeline.js')).FluxInpaintPipeline,
  FluxFillPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/flux/flux_fill_pipeline.js')).FluxFillPipeline,
  FluxKontextPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/flux/flux_kontext_pipeline.js')).FluxKontextPipeline,
  StableDiffusion3InpaintPipeline: async (): Promise<PipelineClass> => (await import('./pipelines/sd3/sd3_inpaint_pipeline.js')).StableDiffusion3InpaintPipeline,
} as const;

/** The built-in tiny pipelines, by the name `dtorch generate --model` takes. */
const tinyPipelines = {
  'tiny-flux': { pipeline: 'FluxPipeline', make: async (options) => (await import('./pipelines/flux/flux_pipeline.js')).FluxPipeline.tiny(options) },
  'tiny-sd3': { pipeline: 'StableDiffusion3Pipeline', make: async (options) => (await import('./pipelines/sd3/sd3_pipeline.js')).StableDiffusion3Pipeline.tiny(options) },
} as const satisfies Record<string, TinyPipeline>;

/** The built-in trained pipelines, by the name `dtorch generate --model` takes. */
const trainedPipelines = {
  'shapes-flux': {
    pipeline: 'FluxPipeline',
    about: 'FLUX.1-dev\'s architecture at 5.6 M parameters, trained on drawn shapes (tools/shapes): for checking the system, not a general image model',
    defaults: { width: 128, height: 128, numInferenceSteps: 20, maxSequenceLength: 96, negativePrompt: '', trueCfgScale: 4 },
    folder: async () => (await import('./pipelines/tiny/trained_pipeline_folder.js')).trainedPipelineFolder('shapes-flux', { tokenizer: 'clip', tokenizer_2: 't5' }),
  },
} as const satisfies Record<string, TrainedPipeline>;

/** A model class name the registry holds (a pipeline's component table names its classes by them). */
export type RegisteredModelName = keyof typeof models;
/** A scheduler class name the registry holds. */
export type RegisteredSchedulerName = keyof typeof schedulers;

/**
 * Every class DTorch loads by name: `models`, `schedulers`, `tokenizers` (as model_index.json
 * names a pipeline's parts), `pipelines` (loaded when asked for), the built-in `tinyPipelines`
 * (random weights) and `trainedPipelines` (shipped weights).
 */
export const registry = Object.freeze({
  /** The models, by class name. */
  models: models as Readonly<Record<string, RegisteredModel>>,
  /** The schedulers, by class name. */
  schedulers: schedulers as Readonly<Record<string, typeof FlowMatchEulerDiscreteScheduler>>,
  /** The tokenizer class names model_index.json gives (AutoTokenizer loads each). */
  tokenizers: tokenizers as readonly string[],
  /** The pipeline classes, by _class_name, each imported when first asked for. */
  pipelines: pipelines as Readonly<Record<string, () => Promise<PipelineClass>>>,
  /** The built-in tiny pipelines, by name. */
  tinyPipelines: tinyPipelines as Readonly<Record<string, TinyPipeline>>,
  /** The built-in trained pipelines, by name. */
  trainedPipelines: trainedPipelines as Readonly<Record<string, TrainedPipeline>>,
});

/** `table[name]` when `name` is one of its own keys (never an Object.prototype member such as 'constructor'). */
export function registered<V>(table: Readonly<Record<string, V>>, name: string): V | undefined {
  return Object.hasOwn(table, name) ? table[name] : undefined;
}
