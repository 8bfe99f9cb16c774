// The bounded queue of `dtorch serve` and the one loop that runs it: a job waits here until the
// pipeline is free; then it runs with the queued jobs that can share its call (the same size,
// steps, guidance and negative prompt: batchKey), up to maxBatch images. A full queue is a 429
// whose Retry-After is the time the queue ahead should take. Cancelling a queued job takes it
// out; a running one is answered at once and its call stops between steps once no job of the
// batch still wants it. Shutdown stops taking jobs, cancels the queued ones, and finishes (or
// cancels) the running one: every accepted job ends in a final state, journaled.
import { writeFileSync } from 'node:fs';
import { isDTorchError, ErrorCode } from '@dtorch/common';
import { stepRate } from '../cli/progress.js';
import type { StepInfo } from '../pipelines/diffusion_pipeline.js';
import type { ImageRequest } from './image_request.js';
import { finalStates, type Job, type JobStore } from './job_store.js';
import { ClusterRunner } from './cluster_runner.js';
import { batchKey, type PipelineRunner } from './pipeline_runner.js';
import { RequestError } from './request_error.js';

/** A full queue: a 429, with the seconds to wait before trying again. */
export class QueueFullError extends RequestError {
  /**
   * @param retryAfterSeconds What Retry-After says.
   * @param limit The queue's length.
   */
  constructor(
    readonly retryAfterSeconds: number,
    limit: number,
  ) {
    super(429, null, `the queue is full (${limit} jobs waiting); try again in ${retryAfterSeconds} s`, 'QUEUE_FULL');
  }
}

/** What the queue reports as it runs (the metrics). */
export interface QueueObserver {
  /** One denoising step of a batch took `seconds`. */
  step?(seconds: number): void;
  /** A batch of `images` images ran in `seconds`. */
  batch?(images: number, seconds: number): void;
  /** A job was accepted into the queue. */
  accepted?(job: Job): void;
}

interface Running {
  jobs: Job[];
  controller: AbortController;
  // why it was aborted: a cancel by the jobs' clients, or shutdown
  reason?: { code: string; message: string };
}

/** The queue and its loop over one PipelineRunner. */
export class JobQueue {
  readonly #queued: Job[] = [];
  #running: Running | undefined;
  #wake: (() => void) | undefined;
  #closing = false;
  #loop: Promise<void> | undefined;
  // seconds per batch, averaged: what Retry-After is made of
  #batchSeconds: number | undefined;

  /**
   * @param store Where jobs are kept and journaled.
   * @param runner What runs them.
   * @param maxQueue Jobs waiting at most.
   * @param maxBatch Images of one call at most.
   * @param observer Told of each step and batch.
   */
  constructor(
    readonly store: JobStore,
    readonly runner: PipelineRunner,
    readonly maxQueue: number,
    readonly maxBatch: number,
    readonly observer: QueueObserver = {},
  ) {}

  /** Jobs waiting. */
  get length(): number {
    return this.#queued.length;
  }

  /** Whether shutdown has begun (no new jobs). */
  get closing(): boolean {
    return this.#closing;
  }

  /** Starts the loop. */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** The seconds the queue ahead should take: what a 429's Retry-After says. */
  retryAfterSeconds(): number {
    const batches = Math.ceil((this.#queued.length + 1) / Math.max(1, this.runner.canBatch ? this.maxBatch : 1));
    return Math.max(1, Math.ceil(batches * (this.#batchSeconds ?? 1)));
  }

  /** A new queued job for `request`; a 429 when the queue is full, a 503 once shutdown began or while a cluster's pipeline cannot run. */
  submit(request: ImageRequest): Job {
    if (this.#closing) throw new RequestError(503, null, 'the server is shutting down and takes no new jobs', 'SHUTTING_DOWN');
    // behind a cluster: a 503 once a lost worker left the mesh fewer devices than it needs
    const refused = this.runner instanceof ClusterRunner ? this.runner.refusal() : undefined;
    if (refused) throw refused;
    if (this.#queued.length >= this.maxQueue) throw new QueueFullError(this.retryAfterSeconds(), this.maxQueue);
    const job = this.store.create(request);
    this.#queued.push(job);
    this.observer.accepted?.(job);
    this.#wake?.();
    return job;
  }

  /** Cancels `job`: false when it had already ended. */
  cancel(job: Job): boolean {
    if (finalStates.includes(job.state)) return false;
    const error = { code: ErrorCode.Cancelled, message: 'cancelled by a DELETE /v1/jobs/:id' };
    const at = this.#queued.indexOf(job);
    if (at >= 0) this.#queued.splice(at, 1);
    this.store.update(job, { state: 'cancelled', finishedAt: Date.now(), error });
    const running = this.#running;
    if (running?.jobs.includes(job) && running.jobs.every((j) => finalStates.includes(j.state))) {
      running.reason = error;
      running.controller.abort();
    }
    return true;
  }

  /**
   * Stops taking jobs, cancels the queued ones, and ends the running one: finished, or cancelled
   * between steps under `cancelRunning` or once `timeoutMs` has passed.
   */
  async shutdown(cancelRunning: boolean, timeoutMs: number): Promise<void> {
    this.#closing = true;
    const error = { code: 'SHUTDOWN', message: 'the server shut down before this job ran; submit it again' };
    for (const job of this.#queued.splice(0)) this.store.update(job, { state: 'cancelled', finishedAt: Date.now(), error });
    const abort = () => {
      if (this.#running && !this.#running.controller.signal.aborted) {
        this.#running.reason = { code: 'SHUTDOWN', message: 'the server shut down while this job ran; submit it again' };
        this.#running.controller.abort();
      }
    };
    if (cancelRunning) abort();
    const timer = setTimeout(abort, timeoutMs);
    this.#wake?.();
    try {
      await this.#loop;
    } finally {
      clearTimeout(timer);
    }
  }

  async #run(): Promise<void> {
    for (;;) {
      if (this.#queued.length === 0) {
        if (this.#closing) return;
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      await this.#runBatch(this.#takeBatch());
    }
  }

  // the first queued job and those that can share its call, up to maxBatch images
  #takeBatch(): Job[] {
    const first = this.#queued.shift()!;
    const batch = [first];
    if (!this.runner.canBatch || this.maxBatch <= 1) return batch;
    const key = batchKey(first.request);
    let images = first.request.n;
    for (let i = 0; i < this.#queued.length; ) {
      const job = this.#queued[i]!;
      if (batchKey(job.request) === key && images + job.request.n <= this.maxBatch) {
        batch.push(job);
        images += job.request.n;
        this.#queued.splice(i, 1);
      } else {
        i++;
      }
    }
    return batch;
  }

  async #runBatch(jobs: Job[]): Promise<void> {
    const running: Running = { jobs, controller: new AbortController() };
    this.#running = running;
    const startedAt = Date.now();
    const images = jobs.reduce((sum, j) => sum + j.request.n, 0);
    for (const job of jobs) this.store.update(job, { state: 'running', startedAt, batchImages: images });
    let first: StepInfo | undefined;
    let last = performance.now();
    const onStep = (info: StepInfo) => {
      const now = performance.now();
      this.observer.step?.((now - last) / 1000);
      last = now;
      first ??= info;
      const { stepsPerSecond, secondsLeft } = stepRate(first, info);
      const progress = { step: info.step, steps: info.steps, ...(stepsPerSecond !== undefined && { stepsPerSecond, etaSeconds: secondsLeft }) };
      for (const job of jobs) if (job.state === 'running') this.store.update(job, { progress });
    };
    try {
      const { images: pngs, timings } = await this.runner.run(
        jobs.map((j) => j.request),
        onStep,
        running.controller.signal,
      );
      const finishedAt = Date.now();
      this.#observe(images, (finishedAt - startedAt) / 1000);
      jobs.forEach((job, i) => {
        if (job.state !== 'running') return; // cancelled while its batch ran on
        const files = pngs[i]!.map((png) => {
          const file = this.store.newFile();
          writeFileSync(file.path, png);
          return file.name;
        });
        const { encodeMs, prepareMs, denoiseMs, decodeMs } = timings;
        this.store.update(job, { state: 'succeeded', finishedAt, files, timings: { encodeMs, prepareMs, denoiseMs, decodeMs, queueMs: startedAt - job.createdAt, totalMs: finishedAt - job.createdAt } });
      });
    } catch (err) {
      const cancelled = isDTorchError(err, ErrorCode.Cancelled) && running.reason !== undefined;
      const error = cancelled ? running.reason! : { code: isDTorchError(err) ? err.code : ErrorCode.Internal, message: err instanceof Error ? err.message : String(err) };
      for (const job of jobs) if (job.state === 'running') this.store.update(job, { state: cancelled ? 'cancelled' : 'failed', finishedAt: Date.now(), error });
    } finally {
      this.#running = undefined;
    }
  }

  #observe(images: number, seconds: number): void {
    this.#batchSeconds = this.#batchSeconds === undefined ? seconds : 0.7 * this.#batchSeconds + 0.3 * seconds;
    this.observer.batch?.(images, seconds);
  }
}
