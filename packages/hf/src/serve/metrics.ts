// GET /metrics: Prometheus text through prom-client, on a registry of this server's own (two
// servers in one process do not mix their numbers): the queue's length, jobs by state, step and
// batch times, each device's memory (the CUDA allocator's on GPUs, the engine's count on CPU
// devices), and prom-client's process metrics.
import * as dt from '@dtorch/api';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { JobQueue } from './job_queue.js';
import type { JobStore, JobState } from './job_store.js';

/** The server's metrics and their registry. */
export class ServeMetrics {
  /** The server's own registry (GET /metrics writes it). */
  readonly registry = new Registry();
  /** Seconds per denoising step. */
  readonly stepSeconds: Histogram;
  /** Images per generate call. */
  readonly batchImages: Histogram;
  /** Requests answered, by route and status. */
  readonly requests: Counter<'route' | 'status'>;

  /**
   * @param store The jobs counted by state.
   * @param queue The queue whose length is reported.
   * @param mesh The devices whose memory is reported.
   */
  constructor(store: JobStore, queue: () => JobQueue | undefined, mesh: () => dt.DeviceMesh | undefined) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'dtorch_serve_' });
    new Gauge({
      name: 'dtorch_serve_queue_length',
      help: 'Jobs waiting for the pipeline',
      registers,
      collect() {
        this.set(queue()?.length ?? 0);
      },
    });
    new Gauge({
      name: 'dtorch_serve_jobs',
      help: 'Jobs by state, since the journal began',
      labelNames: ['state'],
      registers,
      collect() {
        for (const [state, count] of Object.entries(store.counts()) as [JobState, number][]) this.set({ state }, count);
      },
    });
    new Gauge({
      name: 'dtorch_serve_device_memory_bytes',
      help: "Bytes allocated on each device of the pipeline's mesh",
      labelNames: ['device'],
      registers,
      collect() {
        const m = mesh();
        if (!m) return;
        if (m.deviceType === 'cuda') {
          // behind a cluster, this host's GPUs only (node 0's, numbered as on the host); the workers' are not known here
          const own = dt.cluster.isRunning() ? new Set(dt.cluster.devices('cuda').filter((d) => d.node === 0).map((d) => d.index)) : undefined;
          for (const d of m.devices) if (!own || own.has(d)) this.set({ device: `cuda:${d}` }, dt.cuda.memoryStats(d).allocatedBytes);
        } else {
          for (const d of dt.memory().perDevice) this.set({ device: d.device }, d.allocatedBytes);
        }
      },
    });
    this.stepSeconds = new Histogram({ name: 'dtorch_serve_step_seconds', help: 'Seconds per denoising step (of a whole batch)', buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers });
    this.batchImages = new Histogram({ name: 'dtorch_serve_batch_images', help: 'Images per generate call', buckets: [1, 2, 4, 8, 16, 32, 64], registers });
    this.requests = new Counter({ name: 'dtorch_serve_http_requests_total', help: 'HTTP requests answered, by route and status', labelNames: ['route', 'status'], registers });
  }
}
