// What every text-to-image pipeline of this package shares, as diffusers' DiffusionPipeline:
// fromPretrained reads a pipeline folder (model_index.json and one subfolder per component) or
// a hub id, `generate` runs the one lifecycle (pipeline_lifecycle.ts) with its family's hooks
// and returns PNGs, a tensor in [0, 1] or the final latents. generate() calls take turns, and
// dispose() ends them. DiffusionPipeline.fromPretrained picks the class from model_index.json's
// _class_name (the registry's pipelines).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkKnownOptions } from '@dtorch/common';
import type * as nn from '@dtorch/nn';
import type { CacheConfig } from '../cache/cache_config.js';
import type { CacheDecision } from '../cache/step_cache.js';
import { checkPretrainedOptions, repoOptions, type FromPretrainedOptions, type Quantization } from '../loading/options.js';
import { diffusersLayoutLora, type DiffusersLora } from '../lora/lora_formats.js';
import { fetchLoraFile } from '../lora/lora_source.js';
import type { LoraFile } from '../lora/lora_state_dict.js';
import {
  activeAdapterWeights,
  activeAdapters,
  adaptersFused,
  addPipelineLora,
  deleteAdapters,
  enableAdapters,
  fuseAdapters,
  listAdapters,
  setAdapters,
  unfuseAdapters,
  unloadAdapters,
  withLoraScale,
  type LoadLoraWeightsOptions,
  type LoraComponents,
} from '../lora/pipeline_lora.js';
import { applyGroupOffloading, type GroupOffloading, type GroupOffloadingOptions } from '../offload/group_offloading.js';
import { ModelCpuOffload } from '../offload/model_cpu_offload.js';
import { registered, registry } from '../registry.js';
import type { OutputType } from './image_output.js';
import { fetchModelIndex } from './model_index.js';
import { checkCall, runCall, type CallSettings, type DenoisingParts, type PipelineHooks, type StartLatents } from './pipeline_lifecycle.js';

/** Where a pipeline's components live. */
export interface PipelineOptions extends Omit<FromPretrainedOptions, 'subfolder' | 'quantize'> {
  /** The mesh of the transformer, the VAE and the denoising loop (dims named cfg, ulysses, ring, tp, dp split the work). */
  mesh?: dt.DeviceMesh;
  /** The text encoders' mesh (default `mesh`): a text encoder can live elsewhere, or be released after encoding. */
  textEncoderMesh?: dt.DeviceMesh;
  /**
   * The parameters' dtype. Unset, each component keeps its own config's `torch_dtype` (float32 when
   * the config names none; tiny() pipelines are float32); bfloat16 on GPUs is what diffusers users run.
   */
  dtype?: dt.DType;
  /**
   * 'fp8': the transformer's block linears quantized to FP8 on load (PreTrainedModel.quantize); or
   * per component, `{ transformer: 'fp8', text_encoder_2: 'fp8' }` (model_index.json's names).
   */
  quantize?: Quantization | Readonly<Record<string, Quantization>>;
}

/** One finished denoising step, for progress reporting. */
export interface StepInfo {
  /** 1-based. */
  step: number;
  /** The number of steps of this call. */
  steps: number;
  /** The scheduler's timestep of the step just done (0 to 1000, high to low). */
  timestep: number;
  /** Milliseconds since generate() began. */
  elapsedMs: number;
}

/** diffusers' __call__ arguments, camelCase; each pipeline documents the ones it takes and its defaults. */
export interface GenerateOptions {
  /** The prompt, or a list of prompts (numImagesPerPrompt images each); required unless promptEmbeds is given. */
  prompt?: string | readonly string[];
  /** The second text encoder's prompt (default `prompt`). */
  prompt2?: string | readonly string[];
  /** The third text encoder's prompt (SD3's T5; default `prompt`). */
  prompt3?: string | readonly string[];
  /**
   * What the image should not show. SD3: the classifier-free guidance branch (default '').
   * Flux: used only with trueCfgScale > 1 (default none: no true CFG).
   */
  negativePrompt?: string | readonly string[];
  /** The second text encoder's negative prompt (default `negativePrompt`). */
  negativePrompt2?: string | readonly string[];
  /** The third text encoder's negative prompt (SD3's T5; default `negativePrompt`). */
  negativePrompt3?: string | readonly string[];
  /**
   * The image height in pixels, a multiple of the VAE's scale factor times the patch size (16
   * for FLUX.1 and SD3); default defaultSampleSize × vaeScaleFactor (1024 for both).
   */
  height?: number;
  /** The image width in pixels, as `height`. */
  width?: number;
  /** Denoising steps (default 28 for Flux and SD3). */
  numInferenceSteps?: number;
  /**
   * Flux: the embedded guidance of guidance-distilled models (default 3.5; unused when the
   * transformer has no guidance_embeds). SD3: the classifier-free guidance scale, on when > 1
   * (default 7.0).
   */
  guidanceScale?: number;
  /** Flux: true classifier-free guidance when > 1 and a negative prompt is given. */
  trueCfgScale?: number;
  /**
   * The seed of the initial latents, drawn as torch.Generator("cpu").manual_seed(seed) draws them
   * (diffusers' `generator`); default a fresh one. Ignored when `latents` is given.
   */
  seed?: number;
  /** Images per prompt (default 1). */
  numImagesPerPrompt?: number;
  /** T5's tokens, at most 512 (default 512 for Flux, 256 for SD3). */
  maxSequenceLength?: number;
  /** Initial latents (as diffusers' `latents`), instead of drawing them from `seed`. */
  latents?: dt.Tensor;
  /** Encoded prompts instead of `prompt` (each pipeline names the ones it takes: pooled, negative). */
  promptEmbeds?: dt.Tensor;
  /** The CLIP pooled output [batch, pooled_projection_dim] that goes with promptEmbeds (required with it). */
  pooledPromptEmbeds?: dt.Tensor;
  /** The negative prompt encoded, instead of `negativePrompt` (SD3: for guidance; Flux: for true CFG). */
  negativePromptEmbeds?: dt.Tensor;
  /** The pooled output that goes with negativePromptEmbeds (required with it). */
  negativePooledPromptEmbeds?: dt.Tensor;
  /**
   * 'png' (default, diffusers' 'pil'): PNG files; 'tensor': [B, 3, H, W] float32 in [0, 1];
   * 'latent': the final latents, not decoded.
   */
  outputType?: OutputType;
  /** Called after each step; it may not keep the tensors it does not own. */
  onStep?: (info: StepInfo) => void;
  /**
   * Scales every loaded LoRA adapter for this call (diffusers' joint_attention_kwargs "scale",
   * which also scales the text encoders' adapters); default 1. Adapters fused into the weights
   * keep what was fused.
   */
  loraScale?: number;
  /**
   * Cancels the call: checked before it begins and between steps, after which it rejects with
   * CANCELLED and frees what it made (the step under way finishes first).
   */
  signal?: AbortSignal;
}

/**
 * What generate() returns: PNG files, [B, 3, H, W] float32 in [0, 1], or the final latents.
 * `Images` follows the call's outputType (each pipeline's generate() overloads say which).
 */
export interface GenerateOutput<Images extends Buffer[] | dt.Tensor = Buffer[] | dt.Tensor> {
  /** One PNG per image, or the batch as one tensor ('tensor', 'latent'); diffusers' `images`. */
  images: Images;
  /** Milliseconds spent per phase: encode, denoise, decode. */
  timings: {
    /** Encoding the prompts. */
    encodeMs: number;
    /** The start latents: drawing the noise, and for image-to-image encoding the image with the VAE. */
    prepareMs: number;
    /** The denoising loop. */
    denoiseMs: number;
    /** Decoding with the VAE and writing the output (0 for 'latent'). */
    decodeMs: number;
    /** What the transformer's step cache decided, when one is enabled (transformer.enableCache). */
    cache?: CacheReport;
  };
}

/** What a call's step cache decided: per transformer call (two per step with true CFG's branches), whether the cached work ran. */
export interface CacheReport {
  /** The cache's kind ('first-block', 'taylorseer'). */
  readonly kind: CacheConfig['kind'];
  /** Its config, defaults filled in. */
  readonly config: CacheConfig;
  /** Transformer calls in the denoising loop. */
  readonly calls: number;
  /** Of them, those that ran every block. */
  readonly computed: number;
  /** Each call's context, statistic and decision, in order. */
  readonly decisions: readonly CacheDecision[];
}

/** A pipeline class registerPipeline can register: its name is model_index.json's _class_name. */
export interface PipelineClass {
  /** The class name, as model_index.json's _class_name spells it ('FluxPipeline'). */
  readonly name: string;
  /** Loads the pipeline at `source` (a folder or hub id). */
  fromPretrained(source: string, options?: PipelineOptions): Promise<DiffusionPipeline>;
}

// pipeline classes registered by users, found before the registry's
const userPipelines = new Map<string, PipelineClass>();

/** Makes DiffusionPipeline.fromPretrained load `cls` for model_index.json's _class_name `cls.name` (DTorch's own are in the registry). */
export function registerPipeline(cls: PipelineClass): void {
  userPipelines.set(cls.name, cls);
}

/**
 * The base of the text-to-image pipelines, as diffusers' DiffusionPipeline:
 * DiffusionPipeline.fromPretrained loads the class model_index.json names.
 */
export abstract class DiffusionPipeline {
  #disposed = false;
  // generate() calls take turns: each sets the scheduler's timesteps and steps through them
  #turn: Promise<unknown> = Promise.resolve();
  // generate() calls waiting or running: LoRA changes wait for none (they would change a call midway)
  #calls = 0;
  // enableModelCpuOffload's, or enableGroupOffload's per model (one or the other)
  #modelOffload: ModelCpuOffload | undefined;
  #groupOffload: GroupOffloading[] | undefined;
  // enabling or disabling offloading is under way (it reads the weights)
  #offloadChanging = false;

  /** Images for the prompts, as diffusers' __call__ (each pipeline documents its options and defaults). */
  abstract generate(options: GenerateOptions): Promise<GenerateOutput>;

  /**
   * Frees every component's parameters (each pipeline frees its own, then calls this). A
   * generate() call still waiting or running then rejects with TENSOR_DISPOSED, as do later ones.
   */
  dispose(): void {
    this.#disposed = true;
    this.#modelOffload = undefined; // the host copies
    this.#groupOffload = undefined;
  }

  /** Whether dispose() has run. */
  get isDisposed(): boolean {
    return this.#disposed;
  }

  /**
   * Runs `call` (a generate) if the pipeline is not disposed; a failure while or after dispose()
   * ran is TENSOR_DISPOSED, not whatever the freed components made of it.
   */
  protected async whileLive<T>(what: string, call: () => Promise<T>): Promise<T> {
    this.checkLive(what);
    try {
      return await call();
    } catch (err) {
      this.checkLive(what);
      throw err;
    }
  }

  /** A TENSOR_DISPOSED error once dispose() has run. */
  protected checkLive(what: string): void {
    if (this.#disposed) throw new DTorchError(ErrorCode.Disposed, `${what}: the pipeline was disposed (dispose() freed its models); load it again to generate`);
  }

  /**
   * A generate() call through the lifecycle with a family's `hooks`: its inputs checked at the
   * call, then run in its turn. A call still waiting or running when dispose() runs rejects as
   * disposed, not as the freed models fail.
   * @internal
   */
  protected async generateWith<P extends DiffusionPipeline & DenoisingParts, C extends CallSettings, E, T, S extends StartLatents>(
    this: P,
    what: string,
    hooks: PipelineHooks<P, C, E, T, S>,
    options: unknown,
  ): Promise<GenerateOutput> {
    this.checkLive(what);
    if (this.#offloadChanging) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: offloading is being enabled (its weights are being read); await that first`);
    const checked = checkCall(this, hooks, what, options);
    // a per-call scale re-lays the adapters beside weights that offloading keeps off the devices
    const offload = this.offloadMode;
    if (checked.loraScale !== undefined && offload) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: loraScale does not run with ${offload} offloading on; set the adapters' weights with setAdapters() before enabling it`);
    }
    // the call's images read and on the devices, freed when it ends
    const inputs: dt.Tensor[] = [];
    let call: C;
    this.#calls++; // pending from here: LoRA changes wait
    try {
      call = hooks.loadInputs ? await hooks.loadInputs(this, checked, inputs) : checked;
      this.checkLive(what);
    } catch (err) {
      this.#calls--;
      dt.dispose(inputs);
      throw err;
    }
    const lora = this.loraComponents();
    const run = this.#turn.then(() =>
      this.whileLive(what, async () => {
        try {
          return await withLoraScale(what, lora, call.loraScale, () => runCall(this, hooks, what, call));
        } finally {
          // the last model that ran leaves its devices too (diffusers' maybe_free_model_hooks)
          if (!this.isDisposed) this.#modelOffload?.offloadAll(new Set(this.#offloadModels().values()));
        }
      }),
    );
    this.#turn = run.catch(() => undefined);
    void run.finally(() => {
      this.#calls--;
      dt.dispose(inputs);
    }).catch(() => undefined);
    return run;
  }

  // ---- LoRA adapters (diffusers' LoraLoaderMixin) ----

  /**
   * The components that take LoRA adapters, by diffusers' name (transformer, text_encoder, ...);
   * null for one the pipeline has not now. None by default: a pipeline family names its own.
   * @internal
   */
  protected loraComponents(): LoraComponents {
    return new Map();
  }

  /**
   * `file`'s LoRA in diffusers' module paths; by default diffusers' own layout only (a family
   * that converts shared layouts, as Flux, overrides it).
   * @internal
   */
  protected convertLora(file: LoraFile): DiffusersLora {
    return diffusersLayoutLora(file.path, this.constructor.name, file.tensors);
  }

  /**
   * Loads a LoRA (diffusers' load_lora_weights): `source` is a `.safetensors` file, or a folder
   * or hub id holding one (`weightName`). Its modules go to the transformer and the text encoders
   * as the file's keys say (diffusers' layout; for Flux also kohya / sd-scripts, ComfyUI, BFL's
   * and XLabs'; for SD3 also kohya / sd-scripts), as adapter `adapterName`, active with weight 1
   * beside those active already. Keys the pipeline cannot place are an error unless `strict: false`. Returns the adapter's name.
   */
  async loadLoraWeights(source: string, options?: LoadLoraWeightsOptions): Promise<string> {
    const what = `${this.constructor.name}.loadLoraWeights`;
    const o = checkPretrainedOptions<LoadLoraWeightsOptions>(what, options, ['weightName', 'adapterName', 'strict']);
    if (o.strict !== undefined && typeof o.strict !== 'boolean') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: strict must be true or false, got ${JSON.stringify(o.strict)}`);
    this.#checkLoraChange(what);
    const file = await fetchLoraFile(what, source, o.weightName, repoOptions(o));
    this.#checkLoraChange(what); // the file was read meanwhile
    return addPipelineLora(what, this.loraComponents(), file, this.convertLora(file), o.adapterName, o.strict ?? true);
  }

  /** Makes `names` the active adapters with `weights` (one for all or one each; default 1), as diffusers' set_adapters. */
  setAdapters(names: string | readonly string[], weights?: number | readonly number[]): void {
    const what = `${this.constructor.name}.setAdapters`;
    this.#checkLoraChange(what);
    setAdapters(what, this.loraComponents(), names, weights);
  }

  /** Turns the LoRA adapters off, keeping them (diffusers' disable_lora). */
  disableLora(): void {
    this.#checkLoraChange(`${this.constructor.name}.disableLora`);
    enableAdapters(this.loraComponents(), false);
  }

  /** Turns the LoRA adapters on again (diffusers' enable_lora). */
  enableLora(): void {
    this.#checkLoraChange(`${this.constructor.name}.enableLora`);
    enableAdapters(this.loraComponents(), true);
  }

  /** Deletes adapters `names`, releasing their memory (diffusers' delete_adapters). */
  deleteAdapters(names: string | readonly string[]): void {
    const what = `${this.constructor.name}.deleteAdapters`;
    this.#checkLoraChange(what);
    deleteAdapters(what, this.loraComponents(), names);
  }

  /** The active adapters, in the order they were loaded (diffusers' get_active_adapters); none while disabled. */
  getActiveAdapters(): string[] {
    return activeAdapters(this.loraComponents());
  }

  /** The active adapters' weights by name, in the order they were loaded (what setAdapters set); empty while disabled. */
  getAdapterWeights(): Record<string, number> {
    return Object.fromEntries(activeAdapterWeights(this.loraComponents()));
  }

  /** Whether adapters are fused into the weights (fuseLora): setAdapters, disableLora and lora scales cannot change them then. */
  get loraFused(): boolean {
    return adaptersFused(this.loraComponents());
  }

  /** The adapters each component holds (diffusers' get_list_adapters). */
  getListAdapters(): Record<string, string[]> {
    return listAdapters(this.loraComponents());
  }

  /**
   * Fuses the active adapters into the weights, times `loraScale` (default 1), of `components`
   * (default all): they then cost nothing per step (diffusers' fuse_lora). unfuseLora() puts the
   * same bits back. Returns how many linear layers changed.
   */
  fuseLora(options?: { loraScale?: number; components?: readonly string[] }): number {
    const what = `${this.constructor.name}.fuseLora`;
    const o = checkKnownOptions<{ loraScale?: number; components?: readonly string[] }>(`${what} options`, options, ['loraScale', 'components']);
    this.#checkLoraChange(what);
    return fuseAdapters(what, this.loraComponents(), o.loraScale ?? 1, o.components);
  }

  /** Puts back the weights fuseLora changed, bit for bit (diffusers' unfuse_lora). Returns how many linear layers changed. */
  unfuseLora(options?: { components?: readonly string[] }): number {
    const what = `${this.constructor.name}.unfuseLora`;
    const o = checkKnownOptions<{ components?: readonly string[] }>(`${what} options`, options, ['components']);
    this.#checkLoraChange(what);
    return unfuseAdapters(what, this.loraComponents(), o.components);
  }

  /** Removes every adapter and releases its memory (diffusers' unload_lora_weights); weights fused already stay fused. */
  unloadLoraWeights(): void {
    this.#checkLoraChange(`${this.constructor.name}.unloadLoraWeights`);
    unloadAdapters(this.loraComponents());
  }

  // LoRA changes need a live pipeline, no generate() waiting or running, and the weights on their devices
  #checkLoraChange(what: string): void {
    this.checkLive(what);
    if (this.#calls > 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${this.#calls} generate() call(s) are waiting or running; await them before changing LoRA adapters`);
    const offload = this.offloadMode;
    if (offload) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${offload} offloading is on (the weights are in host memory); change LoRA adapters before enabling it, or disable${offload === 'model' ? 'ModelCpuOffload' : 'GroupOffload'}() first`);
  }

  // ---- offloading (diffusers' enable_model_cpu_offload, enable_group_offload) ----

  /**
   * The models that offloading moves, by diffusers' component name, in the order they run (text
   * encoders, transformer, VAE); null for one the pipeline has not now. None by default: a
   * pipeline family names its own.
   * @internal
   */
  protected offloadComponents(): ReadonlyMap<string, nn.Module | null> {
    return new Map();
  }

  /** 'model' or 'group' while enableModelCpuOffload() or enableGroupOffload() is on; else undefined. */
  get offloadMode(): 'model' | 'group' | undefined {
    return this.#modelOffload ? 'model' : this.#groupOffload ? 'group' : undefined;
  }

  /**
   * Keeps every model (text encoders, transformer, VAE) in host memory and each on its mesh
   * only while it runs, as diffusers' enable_model_cpu_offload: a model comes onto its devices when
   * it is called, the one before it leaves, and the last leaves when the call ends. Each rank's
   * pieces move as they lie (any mesh, tensor parallel too). The peak is the largest model plus
   * the activations instead of all models; each call copies every model onto its devices once
   * (twice for the VAE of image-to-image). The images are the same bits. Resolves once the
   * weights are in host memory and off the devices. LoRA adapters are loaded before; the
   * pipeline's models must not be used outside generate() meanwhile except through it.
   */
  async enableModelCpuOffload(): Promise<void> {
    const what = `${this.constructor.name}.enableModelCpuOffload`;
    this.#checkOffloadChange(what, 'model');
    if (this.#modelOffload) return;
    this.#offloadChanging = true;
    try {
      this.#modelOffload = await ModelCpuOffload.enable(what, this.#offloadModels());
    } finally {
      this.#offloadChanging = false;
    }
  }

  /** Puts every model back on its devices for good (the host copies are dropped), as diffusers' remove_all_hooks. */
  disableModelCpuOffload(): void {
    this.#checkOffloadChange(`${this.constructor.name}.disableModelCpuOffload`, 'model');
    this.#modelOffload?.disable();
    this.#modelOffload = undefined;
  }

  /**
   * Keeps the repeated blocks of the transformer and of the text encoders in host memory,
   * `numBlocksPerGroup` blocks to a group, each group on its devices only while its blocks run,
   * the next one's copies recorded ahead (useStream), as diffusers' enable_group_offload with
   * offload_type "block_level" (applyGroupOffloading on each model). The rest of each model
   * (embedders, final norms) and the VAE stay on the devices. The images are the same bits.
   */
  async enableGroupOffload(options?: GroupOffloadingOptions): Promise<void> {
    const what = `${this.constructor.name}.enableGroupOffload`;
    this.#checkOffloadChange(what, 'group');
    if (this.#groupOffload) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: group offloading is on already; disableGroupOffload() first to change it`);
    const models = [...this.#offloadModels()].filter(([name]) => name !== 'vae').map(([, m]) => m);
    this.#offloadChanging = true;
    const done: GroupOffloading[] = [];
    try {
      // the options are checked on the first model, before anything moves
      for (const model of models) done.push(await applyGroupOffloading(model, options));
      this.#groupOffload = done;
    } catch (err) {
      for (const g of done) g.remove(); // a call that throws changes nothing
      throw err;
    } finally {
      this.#offloadChanging = false;
    }
  }

  /** Puts every block back on its devices for good (the host copies are dropped). */
  disableGroupOffload(): void {
    this.#checkOffloadChange(`${this.constructor.name}.disableGroupOffload`, 'group');
    for (const g of this.#groupOffload ?? []) g.remove();
    this.#groupOffload = undefined;
  }

  // the models that offloading moves, those the pipeline has now
  #offloadModels(): Map<string, nn.Module> {
    return new Map([...this.offloadComponents()].filter((e): e is [string, nn.Module] => e[1] !== null));
  }

  // offloading changes need a live pipeline, no generate() waiting or running, no change under way, and not the other kind on
  #checkOffloadChange(what: string, kind: 'model' | 'group'): void {
    this.checkLive(what);
    if (this.#calls > 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${this.#calls} generate() call(s) are waiting or running; await them before changing offloading`);
    if (this.#offloadChanging) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: offloading is being enabled; await that first`);
    const other = this.offloadMode;
    if (other && other !== kind) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${other} offloading is on; disable${other === 'model' ? 'ModelCpuOffload' : 'GroupOffload'}() first (one kind at a time)`);
  }

  /** The pipeline at `source` (a folder or hub id), of the class its model_index.json names. */
  static async fromPretrained(source: string, options?: PipelineOptions): Promise<DiffusionPipeline> {
    const what = 'DiffusionPipeline.fromPretrained';
    const o = checkPretrainedOptions<PipelineOptions>(what, options, ['mesh', 'dtype', 'textEncoderMesh', 'quantize']);
    const index = await fetchModelIndex(what, source, o);
    const cls = userPipelines.get(index.className) ?? (await registered(registry.pipelines, index.className)?.());
    if (!cls) {
      const known = new Set([...Object.keys(registry.pipelines), ...userPipelines.keys()]);
      throw new DTorchError(ErrorCode.NotFound, `${what}: ${source} is a ${index.className}; DTorch has ${[...known].join(', ')}`);
    }
    return cls.fromPretrained(source, options);
  }
}
