// The jobs of `dtorch serve`, in memory and in a small journal on disk (jobs.jsonl in the output
// folder: one JSON line per state change). A restart reads the journal back: a job that was
// queued or running when the server stopped (a SIGKILL, a crash, a power cut) is listed as failed,
// so that nothing accepted is silently lost. Ids are 128 random bits: a job or a result file
// cannot be guessed, and no request's text is ever joined into a path (results are found by id
// in this store). The store keeps the latest `keepJobs` finished jobs: an older one is forgotten
// with its files, and the journal is rewritten with one line per job once it has grown.
import { EventEmitter } from 'node:events';
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { ImageRequest } from './image_request.js';
import { RequestError } from './request_error.js';

/** Where a job is: waiting, running, or one of the final states. */
export type JobState = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

/** The final states: a job in one of them never changes again. */
export const finalStates: readonly JobState[] = ['succeeded', 'failed', 'cancelled'];

/** A job's progress through its denoising loop. */
export interface JobProgress {
  /** Steps done. */
  step: number;
  /** Steps in all. */
  steps: number;
  /** Steps per second after the first step (undefined before two). */
  stepsPerSecond?: number;
  /** Seconds left at that rate. */
  etaSeconds?: number;
}

/** Milliseconds a job spent in each phase. */
export interface JobTimings {
  /** Encoding the prompts. */
  encodeMs: number;
  /** Drawing the start latents. */
  prepareMs: number;
  /** The denoising loop. */
  denoiseMs: number;
  /** Decoding and writing the PNGs. */
  decodeMs: number;
  /** Waiting in the queue. */
  queueMs: number;
  /** From acceptance to the final state. */
  totalMs: number;
}

/** Why a job failed or was cancelled. */
export interface JobError {
  /** A DTorchError code, or INTERRUPTED (the server stopped), SHUTDOWN (it shut down). */
  code: string;
  /** What happened. */
  message: string;
}

/** A result file: its name (served at /v1/files/name) and its path. */
export interface JobFile {
  /** 32 hex digits and .png. */
  name: string;
  /** Where it is written. */
  path: string;
}

/** What a JobStore emits. */
export interface JobStoreEvents {
  /** A job changed: its state, or its progress. */
  change: [Job];
}

/** One job: its request, where it is, and its results. */
export interface Job {
  /** 32 hex digits, random. */
  id: string;
  /** Where it is. */
  state: JobState;
  /** The checked request (its seed filled in). */
  request: ImageRequest;
  /** When it was accepted, in Unix milliseconds. */
  createdAt: number;
  /** When it began to run. */
  startedAt?: number;
  /** When it reached its final state. */
  finishedAt?: number;
  /** Its denoising loop's progress while it runs. */
  progress?: JobProgress;
  /** Images generated with it in one batch (1 alone). */
  batchImages?: number;
  /** The result files' names, served at /v1/files/<name>. */
  files: string[];
  /** Milliseconds per phase of the generate call that made it. */
  timings?: JobTimings;
  /** Why it failed or was cancelled. */
  error?: JobError;
}

/** A new random id: 128 bits as 32 hex digits. */
export function randomId(): string {
  return randomBytes(16).toString('hex');
}

/** The jobs, their journal, and their result files; emits 'change' (a Job) on every update. */
export class JobStore extends EventEmitter<JobStoreEvents> {
  readonly #jobs = new Map<string, Job>();
  readonly #files = new Map<string, string>(); // file name -> path on disk
  readonly #journal: string;
  // final jobs, oldest first: the first go when there are more than keepJobs
  readonly #finished: Job[] = [];
  // journal lines written since it was last compacted
  #lines = 0;
  /** The folder of the result files. */
  readonly imageDir: string;
  /** The folder of edits' pictures and masks, as they were uploaded. */
  readonly inputDir: string;
  /** Jobs the journal held unfinished at start: now failed. */
  readonly interrupted: string[] = [];

  /** Opens (or creates) `outputDir`, reading its journal back. */
  constructor(
    /** The folder of the journal and the results. */
    readonly outputDir: string,
    /** Finished jobs kept, with their files (older ones are forgotten and their files deleted). */
    readonly keepJobs = 1000,
  ) {
    super();
    this.setMaxListeners(0); // one listener per open event stream
    this.imageDir = join(outputDir, 'images');
    this.inputDir = join(outputDir, 'inputs');
    try {
      mkdirSync(this.imageDir, { recursive: true });
      mkdirSync(this.inputDir, { recursive: true });
    } catch (err) {
      throw new DTorchError(ErrorCode.BadFile, `serve: the output folder ${outputDir} cannot be made (${(err as Error).message}); give --output-dir a folder this user can write`);
    }
    this.#journal = join(outputDir, 'jobs.jsonl');
    this.#restore();
  }

  // the journal's last line per job wins; a line cut short by a kill is skipped
  #restore(): void {
    if (!existsSync(this.#journal)) return;
    for (const line of readFileSync(this.#journal, 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      try {
        const job = JSON.parse(line) as Job;
        if (typeof job.id === 'string' && /^[0-9a-f]{32}$/.test(job.id)) this.#jobs.set(job.id, job);
      } catch {
        // a partial last line: the job's earlier line stands
      }
    }
    const now = Date.now();
    for (const job of this.#jobs.values()) {
      if (!finalStates.includes(job.state)) {
        job.state = 'failed';
        job.finishedAt = now;
        job.error = { code: 'INTERRUPTED', message: `the server stopped while this job was ${job.startedAt === undefined ? 'queued' : 'running'}; submit it again` };
        delete job.progress;
        this.interrupted.push(job.id);
      }
      for (const name of job.files) this.#files.set(name, join(this.imageDir, name));
    }
    this.#finished.push(...[...this.#jobs.values()].sort((a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0)));
    this.#forgetOld();
    this.#compact();
  }

  // one line per job, written whole before it replaces the journal (a kill leaves one or the other)
  #compact(): void {
    const temp = `${this.#journal}.tmp`;
    writeFileSync(temp, [...this.#jobs.values()].map((j) => `${JSON.stringify(j)}\n`).join(''));
    renameSync(temp, this.#journal);
    this.#lines = this.#jobs.size;
  }

  // the oldest finished jobs past keepJobs, forgotten with their results and uploads
  #forgetOld(): void {
    while (this.#finished.length > this.keepJobs) {
      const job = this.#finished.shift()!;
      this.#jobs.delete(job.id);
      for (const name of job.files) {
        this.#files.delete(name);
        rmSync(join(this.imageDir, name), { force: true });
      }
      for (const path of [job.request.imagePath, job.request.maskPath]) if (path !== undefined) rmSync(path, { force: true });
    }
  }

  /** A new queued job for `request`, journaled. */
  create(request: ImageRequest): Job {
    const job: Job = { id: randomId(), state: 'queued', request, createdAt: Date.now(), files: [] };
    this.#jobs.set(job.id, job);
    this.update(job, {});
    return job;
  }

  /** The job of `id`, if any (ids of another form are simply not found). */
  get(id: string): Job | undefined {
    return this.#jobs.get(id);
  }

  /** Every job, newest first. */
  list(): Job[] {
    return [...this.#jobs.values()].sort((a, b) => b.createdAt - a.createdAt);
  }

  /** Jobs per state. */
  counts(): Record<JobState, number> {
    const counts: Record<JobState, number> = { queued: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 };
    for (const job of this.#jobs.values()) counts[job.state]++;
    return counts;
  }

  /**
   * Changes `job` (a final job never changes again), journals a state change (not each step's
   * progress) and tells the listeners.
   */
  update(job: Job, change: Partial<Job>): void {
    if (job.finishedAt !== undefined && finalStates.includes(job.state)) return;
    const journaled = change.state !== undefined || change.files !== undefined || Object.keys(change).length === 0;
    Object.assign(job, change);
    if (finalStates.includes(job.state)) delete job.progress;
    if (journaled) {
      appendFileSync(this.#journal, `${JSON.stringify(job)}\n`);
      this.#lines++;
    }
    if (finalStates.includes(job.state)) {
      this.#finished.push(job);
      this.#forgetOld();
      if (this.#lines > 4 * this.#jobs.size + 1000) this.#compact();
    }
    this.emit('change', job);
  }

  /** A path for a new result file of `job`, its name registered for /v1/files. */
  newFile(): JobFile {
    const name = `${randomId()}.png`;
    const path = join(this.imageDir, name);
    this.#files.set(name, path);
    return { name, path };
  }

  /** Writes an uploaded picture under a name of its own; its path. */
  saveInput(bytes: Buffer): string {
    const path = join(this.inputDir, randomId());
    writeFileSync(path, bytes);
    return path;
  }

  /** The path of result file `name`, if this store made it. */
  filePath(name: string): string | undefined {
    return this.#files.get(name);
  }
}

/** Resolves with `job` once it is final; rejects with a 504 after `timeoutMs`. */
export function whenFinal(store: JobStore, job: Job, timeoutMs: number): Promise<Job> {
  if (finalStates.includes(job.state)) return Promise.resolve(job);
  return new Promise((resolve, reject) => {
    const onChange = (changed: Job) => {
      if (changed !== job || !finalStates.includes(job.state)) return;
      clearTimeout(timer);
      store.off('change', onChange);
      resolve(job);
    };
    const timer = setTimeout(() => {
      store.off('change', onChange);
      reject(new RequestError(504, null, `the job ${job.id} did not finish within ${Math.round(timeoutMs / 1000)} s; it goes on: follow it at /v1/jobs/${job.id}`, ErrorCode.Timeout));
    }, timeoutMs);
    store.on('change', onChange);
  });
}
