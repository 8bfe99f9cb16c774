// Load and faults of `dtorch serve` (issue 47), the command run as a user runs it, on tiny-flux
// on the CPU: 200 requests from 20 concurrent clients without and with batching (p50/p99
// latency, throughput, every request answered and journaled), overload (a small queue answers
// 429 with Retry-After), a SIGKILL mid-job then a restart (every accepted job completed or
// listed failed), and 1,000 malformed requests, edits among them (each a 4xx, the service
// unaffected). Prints one JSON line per measurement.
//
//   node bench/serve/load.mjs            (SIZE=64x64 STEPS=4 REQUESTS=200 CLIENTS=20 BATCH=8)
import { spawn, execSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../../packages/hf/dist/cli/main.js', import.meta.url));
const env = process.env;
const SIZE = env.SIZE ?? '64x64';
const STEPS = Number(env.STEPS ?? 4);
const REQUESTS = Number(env.REQUESTS ?? 200);
const CLIENTS = Number(env.CLIENTS ?? 20);
const BATCH = Number(env.BATCH ?? 8);
const MALFORMED = Number(env.MALFORMED ?? 1000);
const work = mkdtempSync(join(tmpdir(), 'dtorch-serve-load-'));
const commit = (() => {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
})();

function emit(record) {
  console.log(JSON.stringify({ bench: 'serve', model: 'tiny-flux', device: 'cpu', size: SIZE, steps: STEPS, cores: availableParallelism(), loadAverage1m: Number(loadavg()[0].toFixed(2)), node: process.version, commit, ...record }));
}

// `dtorch serve` on a free port; resolves once it listens
function startServe(args, timeoutMs = 180_000) {
  const child = spawn(process.execPath, [main, 'serve', '--model', 'tiny-flux', '--port', '0', '--log-level', 'warn', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, HF_HUB_OFFLINE: '1' } });
  let out = '';
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`no start in ${timeoutMs} ms:\n${out}`))), timeoutMs);
    child.stdout.on('data', (d) => {
      out += d;
      const m = / at (http:\/\/\S+) \(the page/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1], exited, output: () => out });
      }
    });
    child.stderr.on('data', (d) => (out += d));
    exited.then((e) => reject(new Error(`exited ${JSON.stringify(e)} before listening:\n${out}`)));
  });
}

async function stop(server) {
  server.child.kill('SIGTERM');
  const timeout = new Promise((r) => setTimeout(() => r('timeout'), 120_000).unref());
  const e = await Promise.race([server.exited, timeout]);
  if (e === 'timeout') server.child.kill('SIGKILL');
  return e;
}

async function send(method, url, body, headers = {}, timeoutMs = 600_000) {
  const started = performance.now();
  try {
    const res = await fetch(url, { method, headers: { ...(body !== undefined && { 'content-type': 'application/json' }), ...headers }, ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }), signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    return { status: res.status, ms: performance.now() - started, retryAfter: res.headers.get('retry-after'), text };
  } catch (err) {
    return { status: 0, ms: performance.now() - started, error: String(err.cause?.code ?? err.message) };
  }
}

// a body the server refuses from its Content-Length: the 413 arrives while the body is still
// being written, and the server then closes; fetch reports the broken pipe, node:http the answer
function sendLarge(url, body, timeoutMs = 60_000) {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const done = (r) => {
      if (settled) return;
      settled = true;
      resolve({ ms: performance.now() - started, ...r });
    };
    const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: timeoutMs }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => done({ status: res.statusCode, text }));
      res.on('error', () => done({ status: res.statusCode, text }));
    });
    // a write cut short after the answer came is no failure of the answer
    req.on('error', (err) => setTimeout(() => done({ status: 0, error: err.code ?? err.message }), 500));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

// a multipart form: strings as fields, Buffers as files
async function sendForm(url, fields) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    if (typeof v === 'string') form.append(k, v);
    else form.append(k, new Blob([v], { type: 'image/png' }), `${k}.png`);
  }
  const started = performance.now();
  try {
    const res = await fetch(url, { method: 'POST', body: form, signal: AbortSignal.timeout(60_000) });
    return { status: res.status, ms: performance.now() - started, text: await res.text() };
  } catch (err) {
    return { status: 0, ms: performance.now() - started, error: String(err.cause?.code ?? err.message) };
  }
}

function percentile(values, p) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

function counts(results) {
  const c = {};
  for (const r of results) c[r.status] = (c[r.status] ?? 0) + 1;
  return c;
}

// journal lines: the last per job
function journal(dir) {
  const jobs = new Map();
  for (const line of readFileSync(join(dir, 'jobs.jsonl'), 'utf8').split('\n')) if (line) jobs.set(JSON.parse(line).id, JSON.parse(line));
  return [...jobs.values()];
}

// REQUESTS requests from CLIENTS clients, each sending its next as soon as one is answered
async function load(maxBatch) {
  const dir = join(work, `load-${maxBatch}`);
  const server = await startServe(['--max-batch', String(maxBatch), '--max-queue', String(CLIENTS * 2), '--output-dir', dir]);
  // warm-up: the first call's allocations are not the service's speed
  await send('POST', `${server.url}/v1/images/generations`, { prompt: 'warm up', size: SIZE, steps: STEPS });
  let next = 0;
  const results = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      while (next < REQUESTS) {
        const i = next++;
        const r = await send('POST', `${server.url}/v1/images/generations`, { prompt: `client ${c} request ${i}: a red circle`, seed: i, size: SIZE, steps: STEPS, response_format: 'url' });
        let batch = null;
        try {
          batch = JSON.parse(r.text).dtorch?.batch_images ?? null;
        } catch {
          // not JSON
        }
        results.push({ ...r, batch });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const exit = await stop(server);
  const jobs = journal(dir).filter((j) => j.request.prompt !== 'warm up');
  const latencies = results.filter((r) => r.status === 200).map((r) => r.ms);
  const batches = results.map((r) => r.batch).filter((b) => b !== null);
  const record = {
    phase: maxBatch > 1 ? 'load-batched' : 'load-unbatched',
    maxBatch,
    requests: REQUESTS,
    clients: CLIENTS,
    statuses: counts(results),
    answered: results.length,
    journaled: jobs.length,
    journaledSucceeded: jobs.filter((j) => j.state === 'succeeded').length,
    p50Ms: Math.round(percentile(latencies, 50)),
    p99Ms: Math.round(percentile(latencies, 99)),
    seconds: Number(seconds.toFixed(2)),
    imagesPerSecond: Number((latencies.length / seconds).toFixed(2)),
    meanBatchImages: batches.length ? Number((batches.reduce((a, b) => a + b, 0) / batches.length).toFixed(2)) : null,
    exit,
  };
  emit(record);
  return record;
}

// a queue of 4 and 40 requests at once: the rest are 429s with Retry-After, the queued all answered
async function overload() {
  const dir = join(work, 'overload');
  const server = await startServe(['--max-queue', '4', '--output-dir', dir]);
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => send('POST', `${server.url}/v1/images/generations`, { prompt: `burst ${i}`, seed: i, size: SIZE, steps: STEPS })));
  const exit = await stop(server);
  const tooMany = results.filter((r) => r.status === 429);
  emit({ phase: 'overload', maxQueue: 4, requests: 40, statuses: counts(results), retryAfterSeconds: [...new Set(tooMany.map((r) => r.retryAfter))], every429HasRetryAfter: tooMany.every((r) => Number(r.retryAfter) >= 1), exit });
}

// jobs accepted, the server SIGKILLed mid-job, restarted: each job completed or listed failed
async function killRestart() {
  const dir = join(work, 'kill');
  let server = await startServe(['--output-dir', dir]);
  const ids = [];
  for (let i = 0; i < 10; i++) ids.push(JSON.parse((await send('POST', `${server.url}/v1/jobs`, { prompt: `job ${i}`, seed: i, size: '128x128', steps: 20 })).text).id);
  // let a few finish, then kill during a later one
  for (let i = 0; i < 600; i++) {
    const states = await Promise.all(ids.map(async (id) => JSON.parse((await send('GET', `${server.url}/v1/jobs/${id}`)).text).state));
    if (states.filter((s) => s === 'succeeded').length >= 3 && states.includes('running')) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  server.child.kill('SIGKILL');
  await server.exited;
  server = await startServe(['--output-dir', dir]);
  const after = await Promise.all(ids.map(async (id) => JSON.parse((await send('GET', `${server.url}/v1/jobs/${id}`)).text)));
  const states = {};
  for (const j of after) states[j.state] = (states[j.state] ?? 0) + 1;
  const exit = await stop(server);
  emit({ phase: 'sigkill-restart', accepted: ids.length, afterRestart: states, everyJobFinal: after.every((j) => ['succeeded', 'failed'].includes(j.state)), interruptedFailed: after.filter((j) => j.error?.code === 'INTERRUPTED').length, exit });
}

// malformed requests of many kinds; then the service still answers and generates
async function malformed() {
  const dir = join(work, 'malformed');
  const server = await startServe(['--output-dir', dir]);
  const rss = (text) => Number(/^dtorch_serve_process_resident_memory_bytes (\d+)/m.exec(text)?.[1] ?? 0);
  const rssBefore = rss((await send('GET', `${server.url}/metrics`)).text);
  const big = 'x'.repeat(10 * 2 ** 20);
  const kinds = [
    ['bad-json', () => send('POST', `${server.url}/v1/images/generations`, '{"prompt": "a cat", ')],
    ['not-an-object', () => send('POST', `${server.url}/v1/jobs`, '"a cat"')],
    ['wrong-types', () => send('POST', `${server.url}/v1/images/generations`, { prompt: 42, n: 'two', steps: [4], seed: 'x' })],
    ['huge-size', () => send('POST', `${server.url}/v1/images/generations`, { prompt: 'a cat', size: '99999x99999' })],
    ['huge-n', () => send('POST', `${server.url}/v1/jobs`, { prompt: 'a cat', n: 1e9 })],
    ['huge-steps', () => send('POST', `${server.url}/v1/jobs`, { prompt: 'a cat', steps: 1e12 })],
    ['negative-seed', () => send('POST', `${server.url}/v1/jobs`, { prompt: 'a cat', seed: -5 })],
    ['unknown-field', () => send('POST', `${server.url}/v1/jobs`, { prompt: 'a cat', output: '/etc/passwd' })],
    ['path-like-id', () => send('GET', `${server.url}/v1/jobs/..%2F..%2F..%2Fetc%2Fpasswd`)],
    ['path-like-file', () => send('GET', `${server.url}/v1/files/..%2Fjobs.jsonl`)],
    ['path-like-events', () => send('GET', `${server.url}/v1/jobs/%2e%2e%2f%2e%2e/events`)],
    ['unknown-id', () => send('DELETE', `${server.url}/v1/jobs/${'f'.repeat(32)}`)],
    ['wrong-content-type', () => send('POST', `${server.url}/v1/jobs`, 'prompt=a+cat', { 'content-type': 'application/x-www-form-urlencoded' })],
    ['unknown-route', () => send('POST', `${server.url}/v1/images/variations`, { prompt: 'a cat' })],
    ['10MB-body', () => sendLarge(`${server.url}/v1/images/generations`, JSON.stringify({ prompt: big }))],
    ['edit-no-image', () => sendForm(`${server.url}/v1/images/edits`, { prompt: 'a cat' })],
    ['edit-not-a-picture', () => sendForm(`${server.url}/v1/images/edits`, { prompt: 'a cat', image: Buffer.from('GIF89a but not really') })],
    ['edit-text-as-image', () => sendForm(`${server.url}/v1/jobs/edits`, { prompt: 'a cat', image: '/etc/passwd' })],
  ];
  const results = [];
  const byKind = {};
  // ten at a time; every 10 MB body is one in 18
  for (let i = 0; i < MALFORMED; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, MALFORMED - i) }, async (_, k) => {
        const [kind, run] = kinds[(i + k) % kinds.length];
        const r = await run();
        (byKind[kind] ??= {})[r.status || r.error] = ((byKind[kind] ?? {})[r.status || r.error] ?? 0) + 1;
        return r;
      }),
    );
    results.push(...batch);
  }
  const health = await send('GET', `${server.url}/healthz`);
  const after = await send('POST', `${server.url}/v1/images/generations`, { prompt: 'still serving', size: SIZE, steps: STEPS });
  const rssAfter = rss((await send('GET', `${server.url}/metrics`)).text);
  const exit = await stop(server);
  emit({
    phase: 'malformed',
    requests: results.length,
    statuses: counts(results),
    all4xx: results.every((r) => r.status >= 400 && r.status < 500),
    byKind,
    healthAfter: health.status === 200 ? JSON.parse(health.text).status : health.status,
    generateAfter: after.status,
    rssMiBBefore: Math.round(rssBefore / 2 ** 20),
    rssMiBAfter: Math.round(rssAfter / 2 ** 20),
    exit,
  });
}

try {
  const alone = await load(1);
  const batched = await load(BATCH);
  emit({ phase: 'batching-gain', throughputGain: Number((batched.imagesPerSecond / alone.imagesPerSecond).toFixed(2)), p50Ratio: Number((batched.p50Ms / alone.p50Ms).toFixed(2)), p99Ratio: Number((batched.p99Ms / alone.p99Ms).toFixed(2)) });
  await overload();
  await killRestart();
  await malformed();
} finally {
  rmSync(work, { recursive: true, force: true });
}
