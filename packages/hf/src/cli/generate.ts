// `dtorch generate`: a prompt in, PNGs out. The flags become a DeviceMesh (mesh_spec.ts), the
// model a pipeline (tiny-flux / tiny-sd3: the registry's built-in random-weight pipelines, made
// here with no download; shapes-flux: a built-in trained one, its shipped folder at the size and
// steps it was trained for unless told; anything else a folder or hub id, all three of the last
// through DiffusionPipeline.fromPretrained), its --lora adapters (lora_spec.ts) loaded and
// weighted (fused under --fuse-lora), its --cache on the transformer, its --offload (offload_spec.ts), with --image its image-to-image variant (with --mask its inpainting one; image_variant.ts), the run a
// progress bar (progress.ts), and the end a summary: time per phase and peak memory per device.
// The output files are checked before anything loads (output_files.ts). The parameters are
// bfloat16 on CUDA devices unless --dtype says otherwise (as diffusers users run FLUX.1 and SD3),
// float32 on CPU devices.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { parseCacheConfig, type CheckedCacheConfig } from '../cache/cache_config.js';
import { StepCacheModel } from '../cache/step_cache_model.js';
import { DiffusionPipeline, type GenerateOptions, type PipelineOptions } from '../pipelines/diffusion_pipeline.js';
import { registered, registry } from '../registry.js';
import { gib } from './info.js';
import { buildMesh, describeMesh, parseDevices, parseParallel } from './mesh_spec.js';
import type { LoraSpec } from './lora_spec.js';
import type { OffloadSpec } from './offload_spec.js';
import { imageSize, imageVariant, sizeMultiple } from './image_variant.js';
import { FluxKontextPipeline } from '../pipelines/flux/flux_kontext_pipeline.js';
import type { InpaintOptions } from '../pipelines/variants/inpaint.js';
import { checkOutputs, writeOutputs } from './output_files.js';
import { StepProgress } from './progress.js';
import { invalid } from './invalid_flag.js';

/** The flags of `dtorch generate`, as commander hands them over (already parsed where a parser is given). */
export interface GenerateFlags {
  /** --model: a hub id, a diffusers pipeline folder, or a built-in pipeline (the registry's tinyPipelines and trainedPipelines). */
  model: string;
  /** --prompt. */
  prompt: string;
  /** --out: the PNG to write (default image.png); several images get -0, -1, ... (outputPath). */
  out: string;
  /** false under --no-overwrite: an existing --out is refused instead of replaced. */
  overwrite: boolean;
  /** --negative-prompt. */
  negativePrompt?: string;
  /** --steps: numInferenceSteps (default the pipeline's). */
  steps?: number;
  /** WIDTHxHEIGHT or one number (parseSize). */
  size?: string;
  /** --seed of the initial latents (default 0). */
  seed: number;
  /** --guidance: guidanceScale (default the pipeline's). */
  guidance?: number;
  /** --true-cfg-scale: Flux's trueCfgScale. */
  trueCfgScale?: number;
  /** --devices, for parseDevices. */
  devices?: string;
  /** --parallel, for parseParallel. */
  parallel?: string;
  /** --dtype of the parameters (default bfloat16 on CUDA devices, float32 on CPU devices). */
  dtype?: dt.DType;
  /** --quantize: 'fp8' quantizes the transformer on load (PipelineOptions.quantize). */
  quantize?: 'fp8';
  /** --images-per-prompt: numImagesPerPrompt. */
  imagesPerPrompt?: number;
  /** --revision on the hub (branch, tag or commit). */
  revision?: string;
  /** --local-files-only: the HF cache only, no download. */
  localFilesOnly?: boolean;
  /** --lora, each flag parsed (parseLora). */
  lora?: LoraSpec[];
  /** --fuse-lora: the LoRAs fused into the weights before generating. */
  fuseLora?: boolean;
  /** --cache: the transformer's step cache as the flag spells it (parseCacheConfig). */
  cache?: string;
  /** --offload, parsed (parseOffload). */
  offload?: OffloadSpec;
  /** --image: the picture to start from (the model's image-to-image variant runs). */
  image?: string;
  /** --strength: how much of the schedule runs from --image (default the pipeline's, 0.6). */
  strength?: number;
  /** --mask: white where --image is redrawn (the model's inpainting variant runs). */
  mask?: string;
}

/** `1024x768` (width x height) or `512` (square). */
export function parseSize(text: string): { width: number; height: number } {
  const match = /^\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?$/.exec(text);
  const width = match ? Number(match[1]) : NaN;
  const height = match ? Number(match[2] ?? match[1]) : NaN;
  if (!(width > 0 && height > 0) || !Number.isSafeInteger(width) || !Number.isSafeInteger(height)) {
    throw invalid(`--size: expected WIDTHxHEIGHT in pixels (1024x1024) or one number for a square, but received ${JSON.stringify(text)}`);
  }
  return { width, height };
}

/** The pipeline of --model: a built-in one made here, else a folder or hub id through fromPretrained. */
export async function loadPipeline(model: string, options: PipelineOptions): Promise<DiffusionPipeline> {
  // fromPretrained picks the class by model_index.json's _class_name (the registry's pipelines)
  const tiny = registered(registry.tinyPipelines, model);
  if (tiny) return tiny.make(options);
  const trained = registered(registry.trainedPipelines, model);
  return DiffusionPipeline.fromPretrained(trained ? await trained.folder() : model, options);
}

/** Peak bytes of each device of `mesh` since the run began: the CUDA allocator's on GPUs, the engine's count on CPU devices. */
function peakMemory(mesh: dt.DeviceMesh): string[] {
  if (mesh.deviceType === 'cuda') {
    return mesh.devices.map((d) => `cuda:${d} ${gib(dt.cuda.memoryStats(d).peakAllocatedBytes)}`);
  }
  const perDevice = new Map(dt.memory().perDevice.map((d) => [d.device, d.peakBytes]));
  return mesh.devices.map((d) => `cpu:${d} ${mebibytes(perDevice.get(`cpu:${d}`) ?? 0)}`);
}

function mebibytes(bytes: number): string {
  return bytes >= 2 ** 30 ? gib(bytes) : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)}s`;
}

/** --lora's adapters loaded, weighted, and fused under --fuse-lora; a line saying what runs (`dtorch serve` loads them the same way). */
export async function applyLoras(pipe: DiffusionPipeline, flags: Pick<GenerateFlags, 'lora' | 'fuseLora' | 'localFilesOnly'>): Promise<void> {
  const loras = flags.lora ?? [];
  if (loras.length === 0) {
    if (flags.fuseLora) throw invalid('--fuse-lora: there is no --lora to fuse; give --lora PATH-OR-ID[:SCALE]');
    return;
  }
  // --revision is the model's; a LoRA repository is read at its main branch
  for (const l of loras) {
    await pipe.loadLoraWeights(l.source, { adapterName: l.name, ...(l.weightName !== undefined && { weightName: l.weightName }), ...(flags.localFilesOnly && { localFilesOnly: true }) });
  }
  pipe.setAdapters(loras.map((l) => l.name), loras.map((l) => l.scale));
  const fused = flags.fuseLora ? pipe.fuseLora() : 0;
  console.log(`LoRA: ${loras.map((l) => `${l.name} x${l.scale}`).join(', ')}${flags.fuseLora ? ` (fused into ${fused} linear layers)` : ''}`);
}

// --cache on the pipeline's transformer; a line saying what runs
function applyCache(pipe: DiffusionPipeline, config: CheckedCacheConfig | undefined): void {
  if (!config) return;
  const { transformer } = pipe as { transformer?: unknown };
  if (!(transformer instanceof StepCacheModel)) throw invalid(`--cache: ${pipe.constructor.name} has no transformer whose steps can be cached; leave out --cache`);
  transformer.enableCache(config);
  const { kind, ...settings } = config;
  console.log(`step cache: ${kind}, ${Object.entries(settings).filter(([, v]) => v !== undefined).map(([k, v]) => `${k} ${v}`).join(', ')}`);
}

// --offload on the pipeline's models; a line saying what runs
async function applyOffload(pipe: DiffusionPipeline, offload: OffloadSpec | undefined): Promise<void> {
  if (!offload) return;
  if (offload.kind === 'model') {
    await pipe.enableModelCpuOffload();
    console.log('offload: each model in host memory, on the devices only while it runs');
  } else {
    await pipe.enableGroupOffload({ numBlocksPerGroup: offload.numBlocksPerGroup });
    console.log(`offload: the transformer's and text encoders' blocks in host memory, ${offload.numBlocksPerGroup} to a group, each group on the devices only while it runs`);
  }
}

/** Runs `dtorch generate`: builds the mesh, loads the pipeline, generates, writes the PNGs and prints a summary. */
export async function runGenerate(flags: GenerateFlags): Promise<void> {
  const size = flags.size === undefined ? undefined : parseSize(flags.size);
  const cache = flags.cache === undefined ? undefined : parseCacheConfig(flags.cache);
  const mesh = buildMesh(flags.devices === undefined ? undefined : parseDevices(flags.devices), parseParallel(flags.parallel));
  const paths = checkOutputs(flags.out, flags.imagesPerPrompt ?? 1, flags.overwrite);
  const dtype = flags.dtype ?? (mesh.deviceType === 'cuda' ? 'bfloat16' : 'float32');
  const started = performance.now();
  dt.resetPeakMemory();
  if (mesh.deviceType === 'cuda') for (const d of mesh.devices) dt.cuda.resetPeakMemoryStats(d);

  const tiny = registered(registry.tinyPipelines, flags.model);
  const trained = registered(registry.trainedPipelines, flags.model);
  const builtIn = tiny !== undefined || trained !== undefined;
  console.log(`loading ${flags.model} on ${describeMesh(mesh)} in ${dtype}${flags.quantize ? ` (the transformer's linears in ${flags.quantize.toUpperCase()})` : ''}`);
  if (tiny) console.log(`${flags.model} is built in with random weights: the image will be noise-like`);
  if (trained) console.log(`${flags.model} is built in: ${trained.about}`);
  if (flags.strength !== undefined && flags.image === undefined) throw invalid('--strength: there is no --image to start from; give --image PICTURE (PNG, JPEG or WebP)');
  if (flags.mask !== undefined && flags.image === undefined) throw invalid('--mask: there is no --image to inpaint; give --image PICTURE with --mask MASK');
  const loaded = await loadPipeline(flags.model, {
    mesh,
    dtype,
    ...(flags.quantize && { quantize: flags.quantize }),
    ...(!builtIn && flags.revision !== undefined && { revision: flags.revision }),
    ...(!builtIn && flags.localFilesOnly && { localFilesOnly: true }),
  });
  let pipe: DiffusionPipeline = loaded;
  let imageOptions: Partial<InpaintOptions> & { width?: number; height?: number; maxArea?: number } = {};
  try {
    if (flags.image !== undefined) {
      // the model's image-to-image variant; the picture's own size unless --size
      const variant = imageVariant(loaded, flags.mask !== undefined);
      pipe = variant;
      const kontext = variant instanceof FluxKontextPipeline;
      if (kontext && flags.strength !== undefined) throw invalid('--strength: a FLUX.1-Kontext model takes the picture as a reference, not a start; leave out --strength');
      imageOptions = {
        image: flags.image,
        ...(flags.mask !== undefined && { maskImage: flags.mask }),
        ...(flags.strength !== undefined && { strength: flags.strength }),
        ...(size ? {} : await imageSize(flags.image, sizeMultiple(variant))),
      };
      // Kontext keeps the size asked (--size or the picture's) as its area
      if (kontext) {
        const { width, height } = size ?? imageOptions;
        imageOptions = { ...imageOptions, maxArea: width! * height! };
      }
      const how = kontext ? 'editing' : flags.mask === undefined ? 'image to image' : `inpainting where ${flags.mask} is white`;
      console.log(`${how} (${variant.constructor.name}) from ${flags.image}`);
    }
    await applyLoras(pipe, flags);
    applyCache(pipe, cache);
    await applyOffload(pipe, flags.offload); // after the LoRAs: they change the weights it keeps
  } catch (err) {
    loaded.dispose();
    throw err;
  }
  const loadMs = performance.now() - started;

  const progress = new StepProgress();
  let steps = 0;
  const options: GenerateOptions & InpaintOptions = {
    prompt: flags.prompt,
    seed: flags.seed,
    outputType: 'png',
    onStep: (info) => {
      steps = info.steps;
      progress.onStep(info);
    },
    ...(flags.negativePrompt !== undefined && { negativePrompt: flags.negativePrompt }),
    ...(trained && { ...trained.defaults }),
    ...(flags.steps !== undefined && { numInferenceSteps: flags.steps }),
    ...(size && { width: size.width, height: size.height }),
    ...(flags.guidance !== undefined && { guidanceScale: flags.guidance }),
    ...(flags.trueCfgScale !== undefined && { trueCfgScale: flags.trueCfgScale }),
    ...(flags.imagesPerPrompt !== undefined && { numImagesPerPrompt: flags.imagesPerPrompt }),
    ...imageOptions,
  };
  let output;
  try {
    output = await pipe.generate(options);
  } finally {
    progress.stop();
  }
  await dt.sync();
  const peaks = peakMemory(mesh);
  pipe.dispose();

  const { images, timings } = output;
  if (!Array.isArray(images)) throw new DTorchError(ErrorCode.Internal, 'generate: asked for PNGs but the pipeline returned a tensor');
  if (images.length !== paths.length) throw new DTorchError(ErrorCode.Internal, `generate: asked for ${paths.length} images but the pipeline returned ${images.length}`);
  writeOutputs(paths, images, flags.overwrite);
  const totalMs = performance.now() - started;
  const rate = steps > 0 && timings.denoiseMs > 0 ? `, ${(steps / (timings.denoiseMs / 1000)).toFixed(2)} steps/s` : '';
  console.log(`wrote ${paths.join(', ')}`);
  console.log(
    `time: load ${seconds(loadMs)}, encode ${seconds(timings.encodeMs)}, ${flags.image !== undefined ? `image encode ${seconds(timings.prepareMs)}, ` : ''}denoise ${seconds(timings.denoiseMs)} (${steps} steps${rate}), ` +
      `decode ${seconds(timings.decodeMs)}, total ${seconds(totalMs)}`,
  );
  if (timings.cache) console.log(`step cache: the cached work ran in ${timings.cache.computed} of ${timings.cache.calls} transformer calls`);
  console.log(`peak memory: ${peaks.join(', ')}`);
}
