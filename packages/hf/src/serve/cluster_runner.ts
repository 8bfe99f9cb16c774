// `dtorch serve` behind a cluster (docs/serve.md, "Behind a cluster"): the service's pipeline on a
// mesh over the cluster's devices, and what happens when a worker is lost. The running job fails
// at once (the engine rejects every wait on another node with NODE_LOST), with an error that names
// the worker and the devices its mesh lost. Then, once that job has unwound, the pipeline is built
// again on the live devices when they are enough for the mesh's shape (its own surviving devices
// first, then the others in cluster order), and the queued jobs run there. When they are not
// enough, every queued job fails with the reason and new ones are refused with a 503 until workers
// enough have joined again (looked at on each request and /healthz), when it is built again.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, isDTorchError } from '@dtorch/common';
import type { Registry } from 'prom-client';
import { buildMesh, describeMesh, type ParallelSpec, type ParallelDim } from '../cli/mesh_spec.js';
import type { GenerateOptions, StepInfo } from '../pipelines/diffusion_pipeline.js';
import type { DiffusionPipeline } from '../pipelines/diffusion_pipeline.js';
import type { ImageRequest } from './image_request.js';
import { PipelineRunner, type BatchOutput, type RunnerOptions, type RunnerSize } from './pipeline_runner.js';
import { RequestError } from './request_error.js';

/** Where the service's pipeline stands: running jobs, being built again after a loss, or unable to run. */
export type ClusterRunnerState = 'ready' | 'rebuilding' | 'unavailable';

/** A worker the cluster lost, as /healthz lists it. */
export interface LostWorker {
  /** Its node number (1, 2, ... in join order). */
  node: number;
  /** Its host name, as it reported it. */
  hostname: string;
  /** Its process id on that host. */
  pid: number;
  /** The engine's NODE_LOST message (how it was lost). */
  message: string;
  /** When the main node noticed, in Unix milliseconds. */
  at: number;
}

/** What /healthz says about the cluster. */
export interface ClusterHealth {
  /** ready, rebuilding, or unavailable (then `reason` says why). */
  state: ClusterRunnerState;
  /** Why it is rebuilding or unavailable. */
  reason: string | null;
  /** The address workers join. */
  address: string;
  /** The mesh the pipeline runs on now, e.g. `cpu:0,2 (ulysses=2)`. */
  mesh: string;
  /** Workers that joined and are live. */
  workersUp: number;
  /** Workers lost since the server started. */
  workersLost: number;
  /** The lost workers. */
  lost: LostWorker[];
  /** How often the pipeline was built again after a loss. */
  rebuilds: number;
}

/** ClusterRunner's settings beyond PipelineRunner's. */
export interface ClusterRunnerOptions extends RunnerOptions {
  /** Builds the pipeline on `mesh` as the server first built it (its model, dtype, LoRAs). */
  build: (mesh: dt.DeviceMesh) => Promise<DiffusionPipeline>;
  /** Told of each loss and rebuild, one line each. */
  log?: (line: string) => void;
}

// a cluster-wide device index as a reader knows it: `cpu 1 (node 1's cpu:0)`
function nameDevice(kind: string, index: number, byIndex: Map<number, dt.cluster.ClusterDevice>): string {
  const d = byIndex.get(index);
  return d ? `${kind} ${index} (node ${d.node}'s ${d.device})` : `${kind} ${index}`;
}

// the mesh's dims as --parallel gave them ([]: a 1-device mesh without names)
function meshDims(mesh: dt.DeviceMesh): ParallelSpec[] {
  return (mesh.dimNames ?? []).map((name, i) => ({ name: name as ParallelDim, degree: mesh.shape[i]! }));
}

/** A PipelineRunner whose mesh spans a cluster's nodes, built again on the devices left when a worker is lost. */
export class ClusterRunner extends PipelineRunner {
  readonly #build: ClusterRunnerOptions['build'];
  readonly #log: (line: string) => void;
  readonly #lost: LostWorker[] = [];
  readonly #unsubscribe: () => void;
  #state: ClusterRunnerState = 'ready';
  #reason: string | undefined;
  // the loss that started the rebuild (what a reason begins with)
  #cause = '';
  // the live devices when it gave up: it tries again only once they changed (a worker joined)
  #gaveUpOn = '';
  // what comes next, as a failed job's error ends: building again on ..., or why it cannot
  #next = '';
  #running: Promise<unknown> | undefined;
  #rebuilding: Promise<void> | undefined;
  #rebuilds = 0;
  #closed = false;

  /**
   * @param pipe The pipeline, on a mesh of the running cluster's devices.
   * @param defaults What every call starts from (as PipelineRunner's).
   * @param options How to build the pipeline again, and where to log.
   */
  constructor(pipe: DiffusionPipeline, defaults: Partial<GenerateOptions> & RunnerSize, options: ClusterRunnerOptions) {
    super(pipe, defaults, options);
    if (!dt.cluster.isRunning()) throw new DTorchError(ErrorCode.InvalidArgument, 'serve: a ClusterRunner needs a running cluster; call await dt.cluster.start(...) first');
    this.#build = options.build;
    this.#log = options.log ?? (() => {});
    this.#unsubscribe = dt.cluster.onNodeLost((err) => this.#onLost(err));
  }

  /** ready, rebuilding or unavailable. */
  get state(): ClusterRunnerState {
    return this.#state;
  }

  get #mesh(): dt.DeviceMesh {
    return (this.pipe as unknown as { mesh: dt.DeviceMesh }).mesh;
  }

  /** Runs `jobs` once the pipeline is ready; a loss during the run fails it with an error naming the worker and the mesh's lost devices. */
  override async run(jobs: readonly ImageRequest[], onStep: (info: StepInfo) => void, signal: AbortSignal): Promise<BatchOutput> {
    await this.#ready();
    const lostBefore = this.#lost.length;
    const mesh = this.#mesh;
    const running = super.run(jobs, onStep, signal);
    this.#running = running;
    try {
      return await running;
    } catch (err) {
      throw this.#explain(err, mesh, this.#lost.slice(lostBefore));
    } finally {
      this.#running = undefined;
    }
  }

  /** A 503 while the pipeline cannot run (new jobs refused), else undefined (a loss the live devices cover is not a refusal: jobs wait for the rebuild). */
  refusal(): RequestError | undefined {
    this.#recover();
    if (this.#state !== 'unavailable') return undefined;
    return new RequestError(503, null, `this server cannot run jobs now: ${this.#reason}`, ErrorCode.NodeLost);
  }

  /** The size an edit gets (PipelineRunner's), or the 503 while the pipeline cannot run. */
  override async editSize(image: Buffer, mask: boolean): Promise<Required<RunnerSize>> {
    const refused = this.refusal();
    if (refused) throw refused;
    return super.editSize(image, mask);
  }

  /** What /healthz says about the cluster. */
  health(): ClusterHealth {
    this.#recover();
    return {
      state: this.#state,
      reason: this.#reason ?? null,
      address: dt.cluster.isRunning() ? dt.cluster.address() : '',
      mesh: describeMesh(this.#mesh),
      workersUp: dt.cluster.isRunning() ? dt.cluster.nodes().filter((n) => n.alive).length : 0,
      workersLost: this.#lost.length,
      lost: this.#lost.map((l) => ({ ...l })),
      rebuilds: this.#rebuilds,
    };
  }

  /** Adds the cluster's gauges to `registry`: workers up and lost, the pipeline's state, rebuilds. */
  async registerMetrics(registry: Registry): Promise<void> {
    const { Gauge } = await import('prom-client');
    const registers = [registry];
    const health = () => this.health();
    new Gauge({
      name: 'dtorch_serve_cluster_workers',
      help: "The cluster's workers: up (joined and live) and lost since the server started",
      labelNames: ['state'],
      registers,
      collect() {
        const h = health();
        this.set({ state: 'up' }, h.workersUp);
        this.set({ state: 'lost' }, h.workersLost);
      },
    });
    new Gauge({
      name: 'dtorch_serve_pipeline_state',
      help: "1 for the pipeline's state (ready, rebuilding after a lost worker, unavailable), 0 for the others",
      labelNames: ['state'],
      registers,
      collect() {
        const now = health().state;
        for (const state of ['ready', 'rebuilding', 'unavailable'] as const) this.set({ state }, state === now ? 1 : 0);
      },
    });
    new Gauge({
      name: 'dtorch_serve_pipeline_rebuilds',
      help: 'Times the pipeline was built again on the devices left after a lost worker',
      registers,
      collect() {
        this.set(health().rebuilds);
      },
    });
  }

  /** Stops listening for losses (the server's shutdown); the caller disposes the pipeline and ends the cluster. */
  close(): void {
    this.#closed = true;
    this.#unsubscribe();
  }

  // waits out a rebuild; throws the reason when the pipeline cannot run
  async #ready(): Promise<void> {
    this.#recover();
    if (this.#rebuilding) await this.#rebuilding;
    if (this.#state === 'unavailable') throw new DTorchError(ErrorCode.NodeLost, `this server could not run the job: ${this.#reason}`);
  }

  #onLost(err: DTorchError): void {
    if (this.#closed) return;
    const known = new Set(this.#lost.map((l) => l.node));
    for (const n of dt.cluster.nodes()) {
      if (!n.alive && !known.has(n.node)) this.#lost.push({ node: n.node, hostname: n.hostname, pid: n.pid, message: err.message, at: Date.now() });
    }
    this.#log(err.message);
    if (this.#state !== 'ready') return; // a rebuild in progress picks its devices again; an unavailable one waits for workers
    const mesh = this.#mesh;
    const live = new Set(dt.cluster.devices(mesh.deviceType).map((d) => d.index));
    const gone = mesh.devices.filter((d) => !live.has(d));
    if (gone.length === 0) return; // a worker the mesh does not use
    this.#startRebuild(`${err.message.replace(/^cluster: /, '')}, and the pipeline's mesh ${describeMesh(mesh)} lost ${gone.length} of its ${mesh.size} devices (${gone.map((d) => `${mesh.deviceType} ${d}`).join(', ')})`);
  }

  // the devices a mesh of the same shape gets now: the current mesh's live ones first, then the
  // other live ones in cluster order; undefined when there are too few
  #pickDevices(): number[] | undefined {
    const mesh = this.#mesh;
    const live = dt.cluster.devices(mesh.deviceType).map((d) => d.index);
    const alive = new Set(live);
    const kept = mesh.devices.filter((d) => alive.has(d));
    const picked = [...kept, ...live.filter((d) => !kept.includes(d))];
    return picked.length >= mesh.size ? picked.slice(0, mesh.size) : undefined;
  }

  #tooFew(): string {
    const mesh = this.#mesh;
    const live = dt.cluster.devices(mesh.deviceType).map((d) => d.index);
    return `the mesh needs ${mesh.size} ${mesh.deviceType} devices and the cluster has ${live.length} left (${live.length > 0 ? `${mesh.deviceType} ${live.join(', ')}` : 'none'}); start \`dtorch worker --main ${dt.cluster.address()}\` on a host with the devices missing, or restart the server with a smaller --parallel`;
  }

  // the live devices of the mesh's kind, as a key
  #liveKey(): string {
    return dt.cluster.devices(this.#mesh.deviceType).map((d) => d.index).join(',');
  }

  // unavailable, but workers joined since: build again
  #recover(): void {
    if (this.#state !== 'unavailable' || this.#closed || !dt.cluster.isRunning() || this.#liveKey() === this.#gaveUpOn || !this.#pickDevices()) return;
    this.#startRebuild(`${this.#cause}; workers joined since`);
  }

  #startRebuild(cause: string): void {
    this.#cause = cause;
    const devices = this.#pickDevices();
    if (!devices) {
      this.#giveUp(this.#tooFew());
      return;
    }
    this.#state = 'rebuilding';
    this.#next = `the server is building the pipeline again on ${this.#mesh.deviceType}:${devices.join(',')}; submit the job again`;
    this.#reason = `${cause}; building the pipeline again on ${this.#mesh.deviceType}:${devices.join(',')}`;
    this.#log(this.#reason);
    this.#rebuilding = this.#rebuild().finally(() => (this.#rebuilding = undefined));
  }

  async #rebuild(): Promise<void> {
    // the running job unwinds first (it fails at once): its tensors are freed with the old pipeline
    await this.#running?.catch(() => undefined);
    const old = this.#mesh;
    if (!this.pipe.isDisposed) this.pipe.dispose();
    for (let attempt = 1; ; attempt++) {
      const devices = this.#pickDevices();
      if (!devices) return this.#giveUp(`then more devices were lost: ${this.#tooFew()}`);
      const mesh = buildMesh({ kind: old.deviceType, indices: devices }, meshDims(old));
      try {
        const pipe = await this.#build(mesh);
        if (this.#closed) {
          pipe.dispose();
          return;
        }
        // a device lost while it was built: pick again
        const live = new Set(dt.cluster.devices(mesh.deviceType).map((d) => d.index));
        if (mesh.devices.some((d) => !live.has(d))) {
          pipe.dispose();
          if (attempt < 3) continue;
          return this.#giveUp('workers kept being lost while the pipeline was built again');
        }
        this.replacePipeline(pipe);
        this.#rebuilds++;
        this.#state = 'ready';
        this.#reason = undefined;
        this.#next = '';
        this.#log(`serving on ${describeMesh(mesh)} again (the pipeline was built again after a lost worker)`);
        return;
      } catch (err) {
        // another worker lost while building: pick again among the devices left (a few times)
        if (isDTorchError(err, ErrorCode.NodeLost) && attempt < 3) continue;
        return this.#giveUp(`building the pipeline again failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }

  // unavailable: the loss, and `why` the pipeline cannot be built again
  #giveUp(why: string): void {
    this.#state = 'unavailable';
    this.#gaveUpOn = this.#liveKey();
    this.#reason = `${this.#cause}; ${why}`;
    this.#next = `the server cannot go on: ${why}`;
    this.#log(`unavailable: ${this.#reason}`);
  }

  // a failed run's error, told in the service's terms when a worker was lost while it ran
  #explain(err: unknown, mesh: dt.DeviceMesh, lostNow: LostWorker[]): unknown {
    if (lostNow.length === 0 && !isDTorchError(err, ErrorCode.NodeLost)) return err;
    const byIndex = new Map<number, dt.cluster.ClusterDevice>();
    for (const n of dt.cluster.nodes()) for (const d of n.devices) if (d.kind === mesh.deviceType) byIndex.set(d.index, d);
    const lostNodes = new Set(lostNow.map((l) => l.node));
    const gone = mesh.devices.filter((d) => lostNodes.has(byIndex.get(d)?.node ?? -1));
    const message = err instanceof Error ? err.message : String(err);
    const loss = lostNow.length > 0 ? lostNow.map((l) => l.message.replace(/^cluster: /, '')).join('; ') : message.replace(/^cluster: /, '');
    const what = gone.length > 0
      ? `the pipeline's mesh ${describeMesh(mesh)} lost ${gone.length} of its ${mesh.size} devices (${gone.map((d) => nameDevice(mesh.deviceType, d, byIndex)).join(', ')})`
      : `the pipeline's mesh ${describeMesh(mesh)} has no device there and stays as it is`;
    const next = this.#state === 'ready' ? 'submit the job again' : this.#next;
    // the run's own error when it is not the loss itself (a collective that timed out, say)
    const own = isDTorchError(err, ErrorCode.NodeLost) ? '' : ` (the run failed with ${isDTorchError(err) ? err.code : 'an error'}: ${message})`;
    return new DTorchError(ErrorCode.NodeLost, `${loss}, while this job ran: ${what}; ${next}${own}`);
  }
}
