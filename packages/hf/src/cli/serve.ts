// `dtorch serve`: loads the pipeline of --model once (as `dtorch generate` does: the same mesh
// flags, dtype defaults and built-in models) and serves it (../serve/). SIGTERM and SIGINT are a
// graceful shutdown: no new jobs, every accepted one answered, then exit code 0. With
// --cluster-workers N the server is a cluster's main node (serve_cluster.ts): it waits for N
// `dtorch worker`s, its mesh names the cluster's devices, and a lost worker fails the running job
// and has the pipeline built again on the devices left, or refused (serve/cluster_runner.ts).
import * as dt from '@dtorch/api';
import { registered, registry } from '../registry.js';
import { readTokenFile } from '../serve/auth.js';
import type { DiffusionPipeline } from '../pipelines/diffusion_pipeline.js';
import { ClusterRunner } from '../serve/cluster_runner.js';
import { PipelineRunner } from '../serve/pipeline_runner.js';
import { createImageServer } from '../serve/server.js';
import { checkServeOptions, type ServeOptions } from '../serve/serve_options.js';
import { applyLoras, loadPipeline } from './generate.js';
import type { LoraSpec } from './lora_spec.js';
import { buildMesh, describeMesh, parseDevices, parseParallel } from './mesh_spec.js';
import { checkServeClusterFlags, endCluster, parseClusterDevices, spansNodes, startServeCluster, type ServeClusterFlags } from './serve_cluster.js';

/** The flags of `dtorch serve`, as commander hands them over. */
export interface ServeFlags extends ServeClusterFlags {
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
  // refused before anything loads: a non-loopback host with no token, a bad limit, a cluster flag alone
  checkServeOptions(options);
  checkServeClusterFlags(flags);
  const parallel = parseParallel(flags.parallel);
  // behind a cluster: its workers joined first, and --devices names its devices cluster-wide
  const clustered = await startServeCluster(flags);
  let pipe: DiffusionPipeline | undefined;
  let server;
  let runner: PipelineRunner;
  try {
    const devices = flags.devices === undefined ? undefined : clustered ? parseClusterDevices(flags.devices) : parseDevices(flags.devices);
    const mesh = buildMesh(devices, parallel);
    const dtype = flags.dtype ?? (mesh.deviceType === 'cuda' ? 'bfloat16' : 'float32');
    const tiny = registered(registry.tinyPipelines, flags.model);
    const trained = registered(registry.trainedPipelines, flags.model);
    // the pipeline with its adapters, on `on` (again on the devices left after a lost worker)
    const build = async (on: dt.DeviceMesh): Promise<DiffusionPipeline> => {
      console.log(`loading ${flags.model} on ${describeMesh(on)} in ${dtype}`);
      const built = await loadPipeline(flags.model, {
        mesh: on,
        dtype,
        ...(!tiny && !trained && flags.revision !== undefined && { revision: flags.revision }),
        ...(!tiny && !trained && flags.localFilesOnly && { localFilesOnly: true }),
      });
      try {
        await applyLoras(built, flags);
        // the VAE's patch parallel moves row pieces between 1-device meshes, which the engine does
        // not do across nodes yet: over several nodes the VAE decodes unsplit by rows
        if (clustered && spansNodes(on)) (built as { vae?: { disablePatchParallel?: () => void } }).vae?.disablePatchParallel?.();
      } catch (err) {
        built.dispose();
        throw err;
      }
      return built;
    };
    pipe = await build(mesh);
    // the adapters as loaded are a job's default; a request may choose among them by name
    const loraSources = Object.fromEntries((flags.lora ?? []).map((l) => [l.name, l.weightName === undefined ? l.source : `${l.source}/${l.weightName}`]));
    const defaults = trained ? { ...trained.defaults } : {};
    runner = clustered ? new ClusterRunner(pipe, defaults, { loraSources, build, log: (line) => console.log(`cluster: ${line}`) }) : new PipelineRunner(pipe, defaults, { loraSources });
    server = await createImageServer(runner, options, flags.model);
  } catch (err) {
    pipe?.dispose();
    if (clustered) await endCluster('the server failed to start');
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
  if (runner instanceof ClusterRunner) runner.close();
  // the pipeline jobs ran on last (built again if a worker was lost)
  if (!runner.pipe.isDisposed) runner.pipe.dispose();
  if (clustered) await endCluster();
  console.log('stopped: every accepted job has a final state');
}
