// `dtorch serve`'s server: one loaded pipeline, a job queue over it, and Fastify in front
// (structured JSON logs through its pino logger, @fastify/sse for event streams). Errors are
// answered as OpenAI's error body naming the field (a schema failure, a RequestError, a body too
// large or not JSON); anything else is a logged 500, never a crash. close() is the graceful
// shutdown: no new jobs, the queued ones cancelled, the running one finished (or cancelled), every
// accepted job answered and journaled, then the listener closed. The HTTP libraries load when a
// server is made, not with @dtorch/hf (they would add a fifth to every import's time).
import type { DeviceMesh } from '@dtorch/api';
import type { FastifyError, FastifyInstance } from 'fastify';
import { finalStates, randomId, JobStore } from './job_store.js';
import { JobQueue, type QueueObserver } from './job_queue.js';
import { ClusterRunner } from './cluster_runner.js';
import { PipelineRunner } from './pipeline_runner.js';
import { RequestError } from './request_error.js';
import { checkServeOptions, type CheckedServeOptions, type ServeOptions } from './serve_options.js';
import { authorized } from './auth.js';

/** A running image server. */
export interface ImageServer {
  /** The Fastify instance (for inject() in tests, or more routes). */
  readonly app: FastifyInstance;
  /** Where it listens, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** Its jobs and their journal. */
  readonly store: JobStore;
  /** Its queue. */
  readonly queue: JobQueue;
  /** Its settings, checked. */
  readonly options: CheckedServeOptions;
  /** Graceful shutdown: resolves once every accepted job is final and the listener is closed. */
  close(): Promise<void>;
}

// what Fastify's own errors name: the schema's field, else the body as a whole
function errorParam(error: FastifyError): string | null {
  const v = error.validation?.[0];
  if (!v) return error.code?.startsWith('FST_ERR_CTP') ? 'body' : null;
  const missing = (v.params as { missingProperty?: string; additionalProperty?: string }).missingProperty ?? (v.params as { additionalProperty?: string }).additionalProperty;
  const path = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
  return [path, missing].filter(Boolean).join('.') || (error.validationContext ?? null);
}

function asRequestError(error: FastifyError): RequestError {
  if (error instanceof RequestError) return error;
  const status = error.statusCode ?? 500;
  if (status >= 500) return new RequestError(500, null, 'internal error; see the server log', 'INTERNAL');
  const param = errorParam(error);
  const message = error.validation ? `${param ?? error.validationContext}: ${error.validation[0]!.message ?? 'is invalid'}` : error.message;
  return new RequestError(status, param, message, error.validation ? 'INVALID_ARGUMENT' : (error.code ?? 'INVALID_ARGUMENT'));
}

/**
 * Serves `runner`'s pipeline (a PipelineRunner, for a trained pipeline's defaults) under
 * `options`; listens before it resolves. `model` is the name /healthz reports.
 */
export async function createImageServer(runner: PipelineRunner, options: ServeOptions = {}, model = 'pipeline'): Promise<ImageServer> {
  const checked = checkServeOptions(options);
  const [{ default: Fastify }, { fastifySSE }, { ServeMetrics }, { registerRoutes }] = await Promise.all([import('fastify'), import('@fastify/sse'), import('./metrics.js'), import('./routes.js')]);
  const store = new JobStore(checked.outputDir, checked.keepJobs);
  // the metrics observe the queue, which reports to them
  const observer: QueueObserver = {
    step: (s) => metrics.stepSeconds.observe(s),
    batch: (images) => metrics.batchImages.observe(images),
    accepted: (job) => app.log.info({ job: job.id, images: job.request.n, size: `${job.request.width}x${job.request.height}`, steps: job.request.steps, queue_length: queue.length }, 'job accepted'),
  };
  const queue = new JobQueue(store, runner, checked.maxQueue, checked.maxBatch, observer);
  const metrics = new ServeMetrics(store, () => queue, () => (runner.pipe as { mesh?: DeviceMesh }).mesh);
  if (runner instanceof ClusterRunner) await runner.registerMetrics(metrics.registry);
  const app = Fastify({
    logger: checked.logLevel === 'silent' ? false : { level: checked.logLevel },
    // a prompt of maxPromptLength characters fits many times over; more is a 413 before it is read
    bodyLimit: 64 * 1024 + 8 * checked.limits.maxPromptLength,
    genReqId: () => randomId().slice(0, 16),
    // types as sent ("2" is not a number); unknown fields refused, not dropped; a field may take two types (lora: a name or a list)
    ajv: { customOptions: { coerceTypes: false, allErrors: false, removeAdditional: false, allowUnionTypes: true } },
    connectionTimeout: 0,
    requestTimeout: (checked.requestTimeoutSeconds + 30) * 1000,
    forceCloseConnections: 'idle',
  });
  await app.register(fastifySSE, { heartbeatInterval: 15_000 });
  if (checked.logLevel !== 'silent' && store.interrupted.length > 0) app.log.warn({ jobs: store.interrupted }, `${store.interrupted.length} jobs were interrupted by the last stop: listed as failed`);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const answer = asRequestError(error);
    // a 503 is an answer (shutting down, a cluster's pipeline that cannot run), not a failure to log
    if (answer.status >= 500 && answer.status !== 503) request.log.error({ err: error }, 'request failed');
    // a body over the limit by its Content-Length: Fastify closes the connection unread, and the
    // client, still writing, loses the 413 to a reset; up to 64 MiB the rest is read and dropped
    // instead (Node does so for a kept connection), so that the client reads its answer
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' && Number(request.headers['content-length']) <= 64 * 2 ** 20) reply.removeHeader('connection');
    void reply.code(answer.status).send(answer.body());
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(new RequestError(404, null, `no route ${request.method} ${request.url.split('?')[0]!.slice(0, 200)}`).body());
  });
  // the token guards the API; the page holds nothing secret and result files are capability URLs
  const token = checked.token;
  if (token !== undefined) {
    app.addHook('onRequest', async (request, reply) => {
      if (!request.url.startsWith('/v1/') || request.url.startsWith('/v1/files/')) return;
      if (!authorized(request.headers.authorization, token)) {
        void reply.header('www-authenticate', 'Bearer');
        throw new RequestError(401, null, 'this server needs Authorization: Bearer <token> (the token of --token-file)');
      }
    });
  }
  app.addHook('onResponse', async (request, reply) => {
    metrics.requests.inc({ route: request.routeOptions.url ?? 'none', status: String(reply.statusCode) });
  });
  registerRoutes(app, { options: checked, store, queue, runner, metrics, model });
  // a structured line per job at its end (a final job never changes again: one line each)
  store.on('change', (job) => {
    if (!finalStates.includes(job.state)) return;
    const fields = { job: job.id, state: job.state, images: job.request.n, size: `${job.request.width}x${job.request.height}`, steps: job.request.steps, batch_images: job.batchImages, edit: job.request.imagePath !== undefined, ...(job.timings && { queue_ms: job.timings.queueMs, total_ms: job.timings.totalMs }), ...(job.error && { error: job.error }) };
    if (job.state === 'failed') app.log.warn(fields, 'job failed');
    else app.log.info(fields, `job ${job.state}`);
  });

  const address = await app.listen({ host: checked.host, port: checked.port });
  queue.start();
  let closing: Promise<void> | undefined;
  return {
    app,
    url: address,
    store,
    queue,
    options: checked,
    close: () =>
      (closing ??= (async () => {
        await queue.shutdown(checked.cancelOnShutdown, checked.shutdownTimeoutSeconds * 1000);
        // a kept-alive connection busy when closing began would otherwise stay open until its
        // keep-alive timeout once idle: idle ones are closed as they come, and after a grace
        // period for answers still being written, all
        const idle = setInterval(() => app.server.closeIdleConnections(), 100);
        const cut = setTimeout(() => app.server.closeAllConnections(), 10_000);
        try {
          await app.close();
        } finally {
          clearInterval(idle);
          clearTimeout(cut);
        }
      })()),
  };
}
