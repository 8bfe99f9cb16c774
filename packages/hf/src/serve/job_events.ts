// GET /v1/jobs/:id/events: a job's changes as server-sent events (written by @fastify/sse):
// 'state' when it is queued or starts, 'progress' after each step (step k/n, percent, steps/s,
// ETA), and 'done' with its final state, after which the stream ends. A stream ends too when the
// client goes, and after `timeoutMs` at most, so that no stream is held open without end.
import { on } from 'node:events';
import { finalStates, type Job, type JobStore } from './job_store.js';
import { jobView } from './job_view.js';

/** One server-sent event. */
export interface JobEvent {
  id: string;
  event: 'state' | 'progress' | 'done';
  data: object;
}

function eventOf(job: Job, seq: number): JobEvent {
  const event = finalStates.includes(job.state) ? 'done' : job.state === 'running' && job.progress ? 'progress' : 'state';
  return { id: String(seq), event, data: jobView(job) };
}

/** The events of `job` from now until it ends, `signal` aborts, or `timeoutMs` passes. */
export async function* jobEvents(store: JobStore, job: Job, signal: AbortSignal, timeoutMs: number): AsyncGenerator<JobEvent> {
  let seq = 0;
  yield eventOf(job, seq++);
  if (finalStates.includes(job.state)) return;
  const stop = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  try {
    for await (const [changed] of on(store, 'change', { signal: stop }) as AsyncIterable<[Job]>) {
      if (changed !== job) continue;
      yield eventOf(job, seq++);
      if (finalStates.includes(job.state)) return;
    }
  } catch (err) {
    // the client went or the stream's time ran out: it ends quietly
    if (!stop.aborted) throw err;
  }
}
