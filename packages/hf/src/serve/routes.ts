// The HTTP face of `dtorch serve`: OpenAI's POST /v1/images/generations, the jobs API, result
// files, the web page, /healthz and /metrics. Every input is checked by a JSON schema (Fastify's
// validator) or by image_request.ts before it reaches a job; ids and file names must be 32 hex
// digits, looked up in the job store, never joined into a path.
import { createReadStream, readFileSync } from 'node:fs';
// the types of @fastify/sse's reply.sse and route option
import type {} from '@fastify/sse';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { editSchema, formNumbers, generationSchema, imageRequest, parseRequestSize, type GenerationBody, type ImageRequest } from './image_request.js';
import { jobEvents } from './job_events.js';
import type { JobQueue } from './job_queue.js';
import { whenFinal, type Job, type JobStore } from './job_store.js';
import { filePath, jobView } from './job_view.js';
import type { ServeMetrics } from './metrics.js';
import { ClusterRunner } from './cluster_runner.js';
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

/** The multipart body of an edit, after formNumbers: the generation's fields, the files as Buffers. */
interface EditBody extends GenerationBody {
  image: unknown;
  mask?: unknown;
  strength?: number;
}

// an edit's request: its files checked and written under the output folder (inputs/, names of
// the server's own), its size the picture's unless it names one
async function editRequest(ctx: RouteContext, body: EditBody): Promise<ImageRequest> {
  if (!Buffer.isBuffer(body.image)) throw new RequestError(400, 'image', 'image must be a file (PNG, JPEG or WebP) sent as multipart/form-data');
  if (body.mask !== undefined && !Buffer.isBuffer(body.mask)) throw new RequestError(400, 'mask', 'mask must be a file (PNG, JPEG or WebP) sent as multipart/form-data');
  const mask = body.mask !== undefined;
  const pictureSize = await ctx.runner.editSize(body.image, mask);
  if (mask) await ctx.runner.editSize(body.mask as Buffer, mask).catch((err: RequestError) => Promise.reject(new RequestError(400, 'mask', err.message.replace(/^image/, 'mask'))));
  const limits = ctx.options.limits;
  const size = body.size !== undefined && body.size !== 'auto' ? parseRequestSize(body.size, limits) : pictureSize;
  if (size.width > limits.maxSide || size.height > limits.maxSide) {
    throw new RequestError(400, 'size', `the picture's size ${size.width}x${size.height} is over this server's limit of ${limits.maxSide}; give a size such as ${limits.maxSide}x${limits.maxSide}`);
  }
  const { image, mask: maskBytes, strength, ...fields } = body;
  const request = imageRequest(fields, limits, size, ctx.runner.loras);
  // an edit is one call of n images: on a dp mesh, a multiple of its degree
  const dp = ctx.runner.dpDegree;
  if (request.n % dp !== 0) throw new RequestError(400, 'n', `n must be a multiple of ${dp} for an edit on this server (its mesh splits a call's images over a dp dim of ${dp})`);
  return {
    ...request,
    imagePath: ctx.store.saveInput(image),
    ...(maskBytes !== undefined && { maskPath: ctx.store.saveInput(maskBytes as Buffer) }),
    ...(strength !== undefined && { strength }),
  };
}

// a 429 carries Retry-After
function submit(ctx: RouteContext, body: GenerationBody | ImageRequest, reply: FastifyReply): Job {
  try {
    return ctx.queue.submit('responseFormat' in body ? body : imageRequest(body, ctx.options.limits, ctx.runner.defaultSize(), ctx.runner.loras));
  } catch (err) {
    if (err instanceof RequestError && err.status === 429) void reply.header('retry-after', String((err as RequestError & { retryAfterSeconds: number }).retryAfterSeconds));
    throw err;
  }
}

// OpenAI's answer of the images API for a final job (an error unless it succeeded)
function imagesResponse(ctx: RouteContext, request: FastifyRequest, job: Job): object {
  if (job.state !== 'succeeded') {
    const status = job.error?.code === 'SHUTDOWN' || job.error?.code === 'NODE_LOST' ? 503 : job.state === 'cancelled' ? 409 : 500;
    throw new RequestError(status, null, `the job ${job.id} ${job.state}: ${job.error?.message ?? ''}`, job.error?.code);
  }
  const data = job.files.map((name) => {
    if (job.request.responseFormat === 'url') return { url: absoluteUrl(request, filePath(name)), revised_prompt: null };
    return { b64_json: readFileSync(ctx.store.filePath(name)!).toString('base64'), revised_prompt: null };
  });
  return { created: Math.floor((job.finishedAt ?? Date.now()) / 1000), data, dtorch: { job_id: job.id, seed: job.request.seed, batch_images: job.batchImages ?? 1, timings: (jobView(job) as { timings: object }).timings } };
}

/** Registers the routes on `app`. */
export function registerRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, queue, options } = ctx;
  const body = generationSchema(options.limits);

  app.get('/', async (_request, reply) => reply.type('text/html; charset=utf-8').header('content-security-policy', "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'").send(page));

  app.get('/healthz', async (_request, reply) => {
    // behind a cluster: its workers, and the pipeline's state after a lost one (a 503 while it cannot run)
    const cluster = ctx.runner instanceof ClusterRunner ? ctx.runner.health() : undefined;
    if (cluster?.state === 'unavailable') void reply.code(503);
    return {
      status: queue.closing ? 'shutting_down' : cluster && cluster.state !== 'ready' ? cluster.state : 'ok',
      model: ctx.model,
      queue_length: queue.length,
      max_queue: options.maxQueue,
      max_batch: options.maxBatch,
      auth: options.token !== undefined,
      default_size: `${ctx.runner.defaultSize().width}x${ctx.runner.defaultSize().height}`,
      limits: { max_side: options.limits.maxSide, max_steps: options.limits.maxSteps, max_images: options.limits.maxImages, max_prompt_length: options.limits.maxPromptLength },
      ...(cluster && { cluster: { state: cluster.state, reason: cluster.reason, address: cluster.address, mesh: cluster.mesh, workers_up: cluster.workersUp, workers_lost: cluster.workersLost, lost: cluster.lost, rebuilds: cluster.rebuilds } }),
    };
  });

  // the LoRA adapters a request's lora may name
  app.get('/v1/loras', async () => ({
    object: 'list',
    data: ctx.runner.loras.loras.map((l) => ({ object: 'lora', name: l.name, source: l.source, scale: l.scale, default: l.default })),
    fused: ctx.runner.loras.fused,
  }));

  app.get('/metrics', async (_request, reply) => reply.type(ctx.metrics.registry.contentType).send(await ctx.metrics.registry.metrics()));

  // OpenAI's images API: waits for the images
  app.post<{ Body: GenerationBody }>('/v1/images/generations', { schema: { body } }, async (request, reply) => {
    const job = await whenFinal(store, submit(ctx, request.body, reply), options.requestTimeoutSeconds * 1000);
    return imagesResponse(ctx, request, job);
  });

  // the jobs API: an id at once
  app.post<{ Body: GenerationBody }>('/v1/jobs', { schema: { body } }, async (request, reply) => {
    const job = submit(ctx, request.body, reply);
    return reply.code(202).header('location', `/v1/jobs/${job.id}`).send(jobView(job));
  });

  // edits: multipart, in a context of their own (no other route parses multipart)
  app.register(async (edits) => {
    const { fastifyMultipart } = await import('@fastify/multipart');
    await edits.register(fastifyMultipart, { attachFieldsToBody: 'keyValues', limits: { fileSize: 32 * 2 ** 20, files: 2, fields: 20, fieldSize: 64 * 1024 + 8 * options.limits.maxPromptLength, parts: 22 } });
    const schema = { body: editSchema(options.limits) };
    const preValidation = async (request: FastifyRequest) => {
      if (request.body && typeof request.body === 'object') formNumbers(request.body as Record<string, unknown>);
    };
    edits.post<{ Body: EditBody }>('/v1/images/edits', { schema, preValidation }, async (request, reply) => {
      const job = await whenFinal(store, submit(ctx, await editRequest(ctx, request.body), reply), options.requestTimeoutSeconds * 1000);
      return imagesResponse(ctx, request, job);
    });
    edits.post<{ Body: EditBody }>('/v1/jobs/edits', { schema, preValidation }, async (request, reply) => {
      const job = submit(ctx, await editRequest(ctx, request.body), reply);
      return reply.code(202).header('location', `/v1/jobs/${job.id}`).send(jobView(job));
    });
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
