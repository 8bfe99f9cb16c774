// A job as the wire shows it (snake_case, as OpenAI's API): its state, request, progress,
// timings, error, and its results' URLs. Nothing of the server's disk shows: a result is
// /v1/files/<random name>.
import type { Job, JobProgress } from './job_store.js';

/** The URL path of result file `name`. */
export function filePath(name: string): string {
  return `/v1/files/${name}`;
}

/** A job's progress on the wire. */
export function progressView(p: JobProgress | undefined): object | null {
  if (!p) return null;
  return { step: p.step, steps: p.steps, percent: Math.round((100 * p.step) / p.steps), steps_per_second: p.stepsPerSecond ?? null, eta_seconds: p.etaSeconds ?? null };
}

/** `job` on the wire. */
export function jobView(job: Job): object {
  const r = job.request;
  return {
    id: job.id,
    object: 'image.job',
    state: job.state,
    created_at: job.createdAt,
    started_at: job.startedAt ?? null,
    finished_at: job.finishedAt ?? null,
    request: { prompt: r.prompt, negative_prompt: r.negativePrompt ?? null, n: r.n, size: `${r.width}x${r.height}`, steps: r.steps ?? null, guidance: r.guidance ?? null, seed: r.seed, response_format: r.responseFormat, lora_scale: r.loraScale ?? null, lora: r.lora?.map((l) => ({ name: l.name, scale: l.scale })) ?? null, edit: r.imagePath !== undefined, mask: r.maskPath !== undefined, strength: r.strength ?? null },
    progress: progressView(job.progress),
    batch_images: job.batchImages ?? null,
    timings: job.timings ? { queue_ms: job.timings.queueMs, encode_ms: job.timings.encodeMs, prepare_ms: job.timings.prepareMs, denoise_ms: job.timings.denoiseMs, decode_ms: job.timings.decodeMs, total_ms: job.timings.totalMs } : null,
    results: job.files.map((name) => ({ url: filePath(name) })),
    error: job.error ?? null,
  };
}
