// The HTTP face of `dtorch serve`: OpenAI's POST /v1/images/generations, the jobs API, result
// files, the web page, /healthz and /metrics. Every input is checked by a JSON schema (Fastify's
// validator) or by image_request.ts before it reaches a job; ids and file names must be 32 hex
// digits, looked up in the job store, never joined into a path.
import { createReadStream, readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { generationSchema, imageRequest, type GenerationBody } from './image_request.js';
import { jobEvents } from './job_events.js';
import type { JobQueue } from './job_queue.js';
import { whenFinal, type Job, type JobStore } from './job_store.js';
import { filePath, jobView } from './job_view.js';
import type { ServeMetrics } from './metrics.js';
import type { PipelineRunner } from './pipeline_runner.js';
import { RequestError } from './request_error.js';
import type { CheckedServeOptions } from './serve_options.js';

/** What the routes serve from. */
export interface RouteContext {
  options: CheckedServeOptions;
  store: JobStore;
  queue: JobQueue;
  runner: PipelineRunner;
  metrics: ServeMetrics;
  /** The model's name, as --model gave it. */
  model: string;
}

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[0-9a-f]{32}$' } } };
const fileParams = { type: 'object', required: ['name'], properties: { name: { type: 'string', pattern: '^[0-9a-f]{32}\\.png$' } } };

// the page, read once (assets/serve/index.html, beside dist/ and src/ alike)
const page = readFileSync(new URL('../../assets/serve/index.html', import.meta.url), 'utf8');

function findJob(store: JobStore, id: string): Job {
  const job = store.get(id);
  if (!job) throw new RequestError(404, 'id', `no job ${id}`);
  return job;
}

// the URL of a result as the client reached this server
function absoluteUrl(request: FastifyRequest, path: string): string {
  return `${request.protocol}://${request.host}${path}`;
}

// a 429 carries Retry-After
function submit(ctx: RouteContext, body: GenerationBody, reply: FastifyReply): Job {
  try {
    return ctx.queue.submit(imageRequest(body, ctx.options.limits, ctx.runner.defaultSize()));
  } catch (err) {
    if (err instanceof RequestError && err.status === 429) void reply.header('retry-after', String((err as RequestError & { retryAfterSeconds: number }).retryAfterSeconds));
    throw err;
  }
}

/** Registers the routes on `app`. */
export function registerRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, queue, options } = ctx;
  const body = generationSchema(options.limits);

  app.get('/', async (_request, reply) => reply.type('text/html; charset=utf-8').header('content-security-policy', "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'").send(page));

  app.get('/healthz', async () => ({
    status: queue.closing ? 'shutting_down' : 'ok',
    model: ctx.model,
    queue_length: queue.length,
    max_queue: options.maxQueue,
    max_batch: options.maxBatch,
    auth: options.token !== undefined,
    default_size: `${ctx.runner.defaultSize().width}x${ctx.runner.defaultSize().height}`,
    limits: { max_side: options.limits.maxSide, max_steps: options.limits.maxSteps, max_images: options.limits.maxImages, max_prompt_length: options.limits.maxPromptLength },
  }));

  app.get('/metrics', async (_request, reply) => reply.type(ctx.metrics.registry.contentType).send(await ctx.metrics.registry.metrics()));

  // OpenAI's images API: waits for the images
  app.post<{ Body: GenerationBody }>('/v1/images/generations', { schema: { body } }, async (request, reply) => {
    const job = await whenFinal(store, submit(ctx, request.body, reply), options.requestTimeoutSeconds * 1000);
    if (job.state !== 'succeeded') {
      const status = job.error?.code === 'SHUTDOWN' ? 503 : job.state === 'cancelled' ? 409 : 500;
      throw new RequestError(status, null, `the job ${job.id} ${job.state}: ${job.error?.message ?? ''}`, job.error?.code);
    }
    const data = job.files.map((name) => {
      if (job.request.responseFormat === 'url') return { url: absoluteUrl(request, filePath(name)), revised_prompt: null };
      const path = store.filePath(name)!;
      return { b64_json: readFileSync(path).toString('base64'), revised_prompt: null };
    });
    return { created: Math.floor((job.finishedAt ?? Date.now()) / 1000), data, dtorch: { job_id: job.id, seed: job.request.seed, batch_images: job.batchImages ?? 1, timings: (jobView(job) as { timings: object }).timings } };
  });

  // the jobs API: an id at once
  app.post<{ Body: GenerationBody }>('/v1/jobs', { schema: { body } }, async (request, reply) => {
    const job = submit(ctx, request.body, reply);
    return reply.code(202).header('location', `/v1/jobs/${job.id}`).send(jobView(job));
  });

  app.get('/v1/jobs', async () => ({ object: 'list', data: store.list().slice(0, 100).map(jobView) }));

  app.get<{ Params: { id: string } }>('/v1/jobs/:id', { schema: { params: idParams } }, async (request) => jobView(findJob(store, request.params.id)));

  app.get<{ Params: { id: string } }>('/v1/jobs/:id/events', { schema: { params: idParams }, sse: 'only' }, async (request, reply) => {
    const job = findJob(store, request.params.id);
    const gone = new AbortController();
    reply.sse.onClose(() => gone.abort());
    await reply.sse.send(jobEvents(store, job, gone.signal, options.requestTimeoutSeconds * 1000));
  });

  app.delete<{ Params: { id: string } }>('/v1/jobs/:id', { schema: { params: idParams } }, async (request) => {
    const job = findJob(store, request.params.id);
    if (!queue.cancel(job) && job.state !== 'cancelled') throw new RequestError(409, 'id', `the job ${job.id} has already ${job.state}; there is nothing to cancel`, 'ALREADY_FINISHED');
    return jobView(job);
  });

  // results: a name this server made (128 random bits), looked up, never a path from the request
  app.get<{ Params: { name: string } }>('/v1/files/:name', { schema: { params: fileParams } }, async (request, reply) => {
    const path = store.filePath(request.params.name);
    if (!path) throw new RequestError(404, 'name', `no file ${request.params.name}`);
    return reply.type('image/png').header('cache-control', 'private, max-age=31536000, immutable').send(createReadStream(path));
  });
}
