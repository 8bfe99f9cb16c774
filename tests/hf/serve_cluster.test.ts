// `dtorch serve` behind a cluster (docs/serve.md, "Behind a cluster"), with real processes on
// 127.0.0.1 and CPU devices: the server as the cluster's main node (--cluster-workers), `dtorch
// worker` processes joining it, and tiny-flux on a ulysses=2 mesh over the server's cpu:0 and a
// worker's. A job gives the image one device gives at the same seed. A worker killed (SIGKILL)
// mid-job fails that job within seconds with NODE_LOST naming the node and the mesh's lost devices;
// the queued job runs on the pipeline built again on the devices left, with the same image; the
// second worker killed leaves too few devices: the running and the queued job fail with the reason,
// new jobs and /healthz get a 503 that says why, and the server still answers; a worker that joins
// then has the pipeline built again on it; the server stops cleanly.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as hf from '@dtorch/hf';
import { startNode, startWorker, stopAll, waitForOutput, within, type Child } from '../cluster/cluster_processes.js';
import { checkBuilt, dtorch as runDtorch, expectOneLineError, main } from './dtorch_command.js';
import { request } from './serve_client.js';

const work = mkdtempSync(join(tmpdir(), 'dtorch-serve-cluster-'));
// every process's collectives bounded (a collective whose connection to a lost node was not open
// yet waits this long, docs/cluster.md), far below the tests' own bounds
const env = { HF_HOME: join(work, 'hf-home'), HF_HUB_OFFLINE: '1', DTORCH_COLLECTIVE_TIMEOUT_MS: '8000' };
let alone: hf.DiffusionPipeline;

beforeAll(async () => {
  checkBuilt();
  alone = await hf.FluxPipeline.tiny();
}, 60_000);

afterAll(() => {
  alone?.dispose();
  rmSync(work, { recursive: true, force: true });
});

afterEach(() => stopAll());

interface Cluster {
  serve: Child;
  url: string;
  /** The worker processes by node number (1, 2, ...). */
  workers: Map<number, Child>;
  all: Child[];
}

// `dtorch serve --cluster-workers N ...` and N `dtorch worker --devices cpu:0`, started once it listens
async function startCluster(workers: number, args: string[], dir: string): Promise<Cluster> {
  const serve = startNode([main, 'serve', '--model', 'tiny-flux', '--port', '0', '--log-level', 'warn', '--output-dir', join(work, dir), '--cluster-workers', String(workers), ...args], env);
  const all = [serve];
  await waitForOutput(serve, /cluster: listening on \S+;/, 30_000);
  const address = /cluster: listening on (\S+);/.exec(serve.output())![1]!;
  for (let i = 0; i < workers; i++) all.push(startWorker(address, { devices: 'cpu:0', env }));
  await within('the server listening', 50_000, waitForOutput(serve, /serving tiny-flux at http:\/\/\S+ \(the page/, 50_000), all);
  const url = /serving tiny-flux at (http:\/\/\S+) \(the page/.exec(serve.output())![1]!;
  const byNode = new Map<number, Child>();
  for (const w of all.slice(1)) {
    await waitForOutput(w, /as node \d+/, 10_000);
    byNode.set(Number(/as node (\d+)/.exec(w.output())![1]), w);
  }
  return { serve, url, workers: byNode, all };
}

// one device's PNG for the same request
async function onOneDevice(prompt: string, seed: number, size: number, steps: number): Promise<Buffer> {
  const { images } = await alone.generate({ prompt, seed, width: size, height: size, numInferenceSteps: steps, outputType: 'png' });
  return (images as Buffer[])[0]!;
}

function worstPixel(a: Buffer, b: Buffer): number {
  const [x, y] = [PNG.sync.read(a).data, PNG.sync.read(b).data];
  expect(x.length).toBe(y.length);
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
  return worst;
}

// polls the job until `done(job)` (within `ms`)
async function jobUntil(url: string, id: string, done: (job: any) => boolean, ms: number): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const deadline = Date.now() + ms;
  for (;;) {
    const job = (await request('GET', `${url}/v1/jobs/${id}`, undefined, {}, 10_000)).body;
    if (done(job)) return job;
    if (Date.now() > deadline) throw new Error(`job ${id} did not get there within ${ms} ms: ${JSON.stringify(job)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const final = (job: { state: string }) => ['succeeded', 'failed', 'cancelled'].includes(job.state);
const stepping = (job: { state: string; progress: { step: number } | null }) => final(job) || (job.state === 'running' && (job.progress?.step ?? 0) >= 2);

async function stop(serve: Child): Promise<void> {
  serve.process.kill('SIGTERM');
  const { code } = await within('the server stopping', 20_000, serve.exited);
  expect(code, serve.output()).toBe(0);
  expect(serve.output()).toContain('every accepted job has a final state');
}

describe('dtorch serve behind a cluster', () => {
  it('serves a job on a mesh over its own device and a worker\'s with the image of one device at the same seed; /healthz and /metrics report the workers', async () => {
    const c = await startCluster(1, ['--devices', 'cpu:0,1', '--parallel', 'ulysses=2'], 'one');
    expect(c.serve.output()).toMatch(/loading tiny-flux on cpu:0,1 \(ulysses=2\)/);
    expect(c.workers.get(1)!.output()).toMatch(/cluster devices 1-1/);
    const r = await request('POST', `${c.url}/v1/images/generations`, { prompt: 'a red circle', seed: 5, size: '64x64', steps: 3, response_format: 'b64_json' }, {}, 40_000);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const got = Buffer.from(r.body.data[0].b64_json, 'base64');
    expect(worstPixel(got, await onOneDevice('a red circle', 5, 64, 3)), 'ulysses=2 across two processes as one device').toBeLessThanOrEqual(1);
    const health = await request('GET', `${c.url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.body.status).toBe('ok');
    expect(health.body.cluster).toMatchObject({ state: 'ready', mesh: 'cpu:0,1 (ulysses=2)', workers_up: 1, workers_lost: 0, rebuilds: 0 });
    const metrics = await (await fetch(`${c.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    expect(metrics).toMatch(/^dtorch_serve_cluster_workers\{state="up"\} 1$/m);
    expect(metrics).toMatch(/^dtorch_serve_pipeline_state\{state="ready"\} 1$/m);
    await stop(c.serve);
    // the server ends the cluster: its worker exits 0
    expect((await within("the worker's exit", 10_000, c.workers.get(1)!.exited)).code).toBe(0);
  }, 60_000);

  it('fails the running job when a worker is killed, builds the pipeline again on the devices left for the queued one, answers 503 once too few are left, and serves again once a worker joins', async () => {
    const c = await startCluster(2, ['--devices', 'cpu:0,1', '--parallel', 'ulysses=2'], 'two');
    const long = { prompt: 'a long one', size: '256x256', steps: 40 };
    const a = (await request('POST', `${c.url}/v1/jobs`, long)).body;
    const b = (await request('POST', `${c.url}/v1/jobs`, { prompt: 'a blue square', seed: 11, size: '64x64', steps: 3 })).body;
    expect((await jobUntil(c.url, a.id, stepping, 30_000)).state, 'the long job runs').toBe('running');

    // node 1 holds cpu 1 of the mesh: killed mid-job
    const killedAt = Date.now();
    c.workers.get(1)!.process.kill('SIGKILL');
    const failedA = await within('the running job failing', 20_000, jobUntil(c.url, a.id, final, 20_000), c.all);
    expect(failedA.state).toBe('failed');
    expect(failedA.finished_at - killedAt, 'the job fails within seconds').toBeLessThan(10_000);
    expect(failedA.error.code).toBe('NODE_LOST');
    expect(failedA.error.message).toMatch(/lost node 1 \(/);
    expect(failedA.error.message).toMatch(/mesh cpu:0,1 \(ulysses=2\) lost 1 of its 2 devices \(cpu 1 \(node 1's cpu:0\)\)/);
    expect(failedA.error.message).toMatch(/building the pipeline again on cpu:0,2/);

    // the queued job runs on the mesh built again over cpu 0 and node 2's cpu 2, with the same image
    const doneB = await within('the queued job', 40_000, jobUntil(c.url, b.id, final, 40_000), c.all);
    expect(doneB.state, JSON.stringify(doneB.error)).toBe('succeeded');
    const png = Buffer.from(await (await fetch(`${c.url}${doneB.results[0].url}`, { signal: AbortSignal.timeout(10_000) })).arrayBuffer());
    expect(worstPixel(png, await onOneDevice('a blue square', 11, 64, 3)), 'on the rebuilt mesh as on one device').toBeLessThanOrEqual(1);
    const healthy = await request('GET', `${c.url}/healthz`);
    expect(healthy.status).toBe(200);
    expect(healthy.body.cluster).toMatchObject({ state: 'ready', mesh: 'cpu:0,2 (ulysses=2)', workers_up: 1, workers_lost: 1, rebuilds: 1 });
    expect(healthy.body.cluster.lost[0]).toMatchObject({ node: 1, pid: c.workers.get(1)!.process.pid });
    expect(await (await fetch(`${c.url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text()).toMatch(/^dtorch_serve_cluster_workers\{state="lost"\} 1$/m);

    // node 2 killed too: one device is left for a mesh of two
    const c2 = (await request('POST', `${c.url}/v1/jobs`, long)).body;
    const d = (await request('POST', `${c.url}/v1/jobs`, { prompt: 'queued', size: '64x64', steps: 3 })).body;
    expect((await jobUntil(c.url, c2.id, stepping, 30_000)).state).toBe('running');
    c.workers.get(2)!.process.kill('SIGKILL');
    const failedC = await within('the second running job failing', 20_000, jobUntil(c.url, c2.id, final, 20_000), c.all);
    expect(failedC.state).toBe('failed');
    expect(failedC.error.code).toBe('NODE_LOST');
    expect(failedC.error.message).toMatch(/lost node 2 \(/);
    expect(failedC.error.message).toMatch(/the server cannot go on: the mesh needs 2 cpu devices and the cluster has 1 left \(cpu 0\)/);
    // the queued job is answered with the reason, not lost
    const failedD = await within('the queued job failing', 20_000, jobUntil(c.url, d.id, final, 20_000), c.all);
    expect(failedD.state).toBe('failed');
    expect(failedD.error.code).toBe('NODE_LOST');
    expect(failedD.error.message).toMatch(/could not run the job: lost node 2 .*needs 2 cpu devices/);
    // new jobs: a 503 that says why; /healthz answers, unhealthy
    const refused = await request('POST', `${c.url}/v1/images/generations`, { prompt: 'more', size: '64x64', steps: 3 });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('NODE_LOST');
    expect(refused.body.error.message).toMatch(/cannot run jobs now: .*needs 2 cpu devices and the cluster has 1 left/);
    const sick = await request('GET', `${c.url}/healthz`);
    expect(sick.status).toBe(503);
    expect(sick.body.status).toBe('unavailable');
    expect(sick.body.cluster).toMatchObject({ state: 'unavailable', workers_up: 0, workers_lost: 2 });
    expect(sick.body.cluster.reason).toMatch(/lost node 2 /);

    // a worker joins again: the next request builds the pipeline on cpu 0 and its cpu 3, and runs
    const address = /cluster: listening on (\S+);/.exec(c.serve.output())![1]!;
    const back = startWorker(address, { devices: 'cpu:0', env });
    await waitForOutput(back, /as node 3: cpu:0 \(cluster devices 3-3\)/, 20_000);
    const again = await request('POST', `${c.url}/v1/images/generations`, { prompt: 'a blue square', seed: 11, size: '64x64', steps: 3, response_format: 'b64_json' }, {}, 40_000);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(worstPixel(Buffer.from(again.body.data[0].b64_json, 'base64'), png)).toBeLessThanOrEqual(1);
    expect((await request('GET', `${c.url}/healthz`)).body.cluster).toMatchObject({ state: 'ready', mesh: 'cpu:0,3 (ulysses=2)', workers_up: 1, workers_lost: 2, rebuilds: 2 });
    await stop(c.serve);
    expect((await within("the new worker's exit", 10_000, back.exited)).code, back.output()).toBe(0);
  }, 60_000);

  it('refuses a cluster flag without --cluster-workers, and a cluster whose workers do not come, in one line', () => {
    expectOneLineError(runDtorch(work, ['serve', '--model', 'tiny-flux', '--cluster-listen', '127.0.0.1:0'], {}, 30_000), /--cluster-listen needs --cluster-workers N/);
    const late = runDtorch(work, ['serve', '--model', 'tiny-flux', '--port', '0', '--cluster-workers', '1', '--cluster-join-timeout', '1'], {}, 30_000);
    expectOneLineError({ ...late, stderr: late.stderr.split('\n').filter((l) => !l.startsWith('[dtorch')).join('\n') }, /0 of 1 workers joined/);
  }, 60_000);
});
