// `dtorch serve`: loads the pipeline of --model once (as `dtorch generate` does: the same mesh
// flags, dtype defaults and built-in models) and serves it (../serve/). SIGTERM and SIGINT are a
// graceful shutdown: no new jobs, every accepted one answered, then exit code 0.
import * as dt from '@dtorch/api';
import { registered, registry } from '../registry.js';
import { readTokenFile } from '../serve/auth.js';
import { PipelineRunner } from '../serve/pipeline_runner.js';
import { createImageServer } from '../serve/server.js';
import { checkServeOptions, type ServeOptions } from '../serve/serve_options.js';
import { applyLoras, loadPipeline } from './generate.js';
import type { LoraSpec } from './lora_spec.js';
import { buildMesh, describeMesh, parseDevices, parseParallel } from './mesh_spec.js';

/** The flags of `dtorch serve`, as commander hands them over. */
export interface ServeFlags {
  /** --model: a hub id, a diffusers pipeline folder, or a built-in pipeline. */
  model: string;
  /** --devices, for parseDevices. */
  devices?: string;
  /** --parallel, for parseParallel. */
  parallel?: string;
  /** --dtype of the parameters (default bfloat16 on CUDA devices, float32 on CPU devices). */
  dtype?: dt.DType;
  /** --host (default 127.0.0.1). */
  host: string;
  /** --port (default 8080). */
  port: number;
  /** --token-file: its first line is the bearer token. */
  tokenFile?: string;
  /** --output-dir: results and the job journal. */
  outputDir: string;
  /** --max-queue. */
  maxQueue: number;
  /** --max-batch. */
  maxBatch: number;
  /** --max-size: the largest side in pixels. */
  maxSize: number;
  /** --max-steps. */
  maxSteps: number;
  /** --max-images: the most images per request (n). */
  maxImages: number;
  /** --max-prompt-length in characters. */
  maxPromptLength: number;
  /** --keep-jobs: finished jobs kept with their files. */
  keepJobs: number;
  /** --cancel-on-shutdown: cancel the running job on SIGTERM instead of finishing it. */
  cancelOnShutdown?: boolean;
  /** --shutdown-timeout in seconds. */
  shutdownTimeout: number;
  /** --log-level. */
  logLevel: NonNullable<ServeOptions['logLevel']>;
  /** --revision on the hub. */
  revision?: string;
  /** --local-files-only. */
  localFilesOnly?: boolean;
  /** --lora, each flag parsed (parseLora): the adapters loaded, a job's default; a request may choose among them by name (`lora`) and scale them (`lora_scale`). */
  lora?: LoraSpec[];
  /** --fuse-lora: the LoRAs fused into the weights (lora_scale then has no effect). */
  fuseLora?: boolean;
}

/** Runs `dtorch serve` until SIGTERM or SIGINT. */
export async function runServe(flags: ServeFlags): Promise<void> {
  const options: ServeOptions = {
    host: flags.host,
    port: flags.port,
    outputDir: flags.outputDir,
    maxQueue: flags.maxQueue,
    maxBatch: flags.maxBatch,
    keepJobs: flags.keepJobs,
    cancelOnShutdown: flags.cancelOnShutdown === true,
    shutdownTimeoutSeconds: flags.shutdownTimeout,
    logLevel: flags.logLevel,
    limits: { maxSide: flags.maxSize, maxSteps: flags.maxSteps, maxImages: flags.maxImages, maxPromptLength: flags.maxPromptLength },
    ...(flags.tokenFile !== undefined && { token: readTokenFile(flags.tokenFile) }),
  };
  // refused before anything loads: a non-loopback host with no token, a bad limit
  checkServeOptions(options);
  const mesh = buildMesh(flags.devices === undefined ? undefined : parseDevices(flags.devices), parseParallel(flags.parallel));
  const dtype = flags.dtype ?? (mesh.deviceType === 'cuda' ? 'bfloat16' : 'float32');
  const tiny = registered(registry.tinyPipelines, flags.model);
  const trained = registered(registry.trainedPipelines, flags.model);
  console.log(`loading ${flags.model} on ${describeMesh(mesh)} in ${dtype}`);
  const pipe = await loadPipeline(flags.model, {
    mesh,
    dtype,
    ...(!tiny && !trained && flags.revision !== undefined && { revision: flags.revision }),
    ...(!tiny && !trained && flags.localFilesOnly && { localFilesOnly: true }),
  });
  let server;
  try {
    await applyLoras(pipe, flags);
    // the adapters as loaded are a job's default; a request may choose among them by name
    const loraSources = Object.fromEntries((flags.lora ?? []).map((l) => [l.name, l.weightName === undefined ? l.source : `${l.source}/${l.weightName}`]));
    server = await createImageServer(new PipelineRunner(pipe, trained ? { ...trained.defaults } : {}, { loraSources }), options, flags.model);
  } catch (err) {
    pipe.dispose();
    throw err;
  }
  console.log(`serving ${flags.model} at ${server.url} (the page: ${server.url}/, the API: ${server.url}/v1/images/generations)`);
  const s = server;
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      console.log(`${signal}: taking no new jobs; ${s.options.cancelOnShutdown ? 'cancelling' : 'finishing'} the running one`);
      void s.close().then(resolve, (err: unknown) => {
        console.error(`shutdown: ${err instanceof Error ? err.message : String(err)}`);
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  pipe.dispose();
  console.log('stopped: every accepted job has a final state');
}
