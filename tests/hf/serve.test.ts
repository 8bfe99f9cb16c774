// `dtorch serve` (packages/hf/src/serve) with tiny-flux on the CPU, through real HTTP: OpenAI's
// images API (b64_json and url, the same PNG bytes as pipe.generate at the seed; edits, the same
// as the pipeline's image-to-image and inpainting variants), the jobs API
// and its event stream, cancelling, the bounded queue's 429, 400s naming the field, the token
// (required off loopback; compared whole), result URLs that cannot be guessed or turned into
// paths, batching (the same images as one by one), LoRA adapters chosen per request (the images
// of setAdapters with the same weights; batched only with the same choice), and, with the command as a child process,
// SIGTERM's graceful shutdown and a SIGKILL's interrupted jobs listed failed after a restart.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { checkBuilt, dtorch as runDtorch, expectOneLineError } from './dtorch_command.js';
import { readEvents, request, startServe, type ServeChild } from './serve_client.js';

const work = mkdtempSync(join(tmpdir(), 'dtorch-serve-'));
const small = { size: '64x64', steps: 3 };
let pipe: hf.DiffusionPipeline;

beforeAll(async () => {
  pipe = await hf.FluxPipeline.tiny();
}, 120_000);

afterAll(() => {
  pipe?.dispose();
  rmSync(work, { recursive: true, force: true });
});

let dirs = 0;
async function serve(options: hf.ServeOptions = {}): Promise<hf.ImageServer> {
  return hf.createImageServer(new hf.PipelineRunner(pipe), { port: 0, logLevel: 'silent', outputDir: join(work, `out-${dirs++}`), ...options }, 'tiny-flux');
}

// what pipe.generate makes for the same settings: `dtorch generate`'s call
async function direct(prompt: string, seed: number, n = 1, size = 64, steps = 3): Promise<Buffer[]> {
  const { images } = await pipe.generate({ prompt, seed, width: size, height: size, numInferenceSteps: steps, numImagesPerPrompt: n, outputType: 'png' });
  return images as Buffer[];
}

describe('dtorch serve: the images API', () => {
  let server: hf.ImageServer;
  beforeAll(async () => {
    server = await serve();
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers b64_json with the PNGs pipe.generate makes at the same seed', async () => {
    const r = await request('POST', `${server.url}/v1/images/generations`, { prompt: 'a red circle', n: 2, seed: 7, response_format: 'b64_json', ...small });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data).toHaveLength(2);
    expect(r.body.dtorch.seed).toBe(7);
    const expected = await direct('a red circle', 7, 2);
    expect(r.body.data.map((d: { b64_json: string }) => Buffer.from(d.b64_json, 'base64').equals(expected[r.body.data.indexOf(d)]!))).toEqual([true, true]);
  });

  it('answers url with unguessable URLs that serve those bytes', async () => {
    const [a, b] = await Promise.all([1, 2].map((seed) => request('POST', `${server.url}/v1/images/generations`, { prompt: 'a cat', seed, response_format: 'url', ...small })));
    const urls = [a!, b!].map((r) => r.body.data[0].url as string);
    for (const url of urls) expect(url).toMatch(new RegExp(`^${server.url}/v1/files/[0-9a-f]{32}\\.png$`));
    expect(urls[0]).not.toBe(urls[1]);
    const png = Buffer.from(await (await fetch(urls[0]!, { signal: AbortSignal.timeout(60_000) })).arrayBuffer());
    expect(png.equals((await direct('a cat', 1))[0]!)).toBe(true);
    // a name of the right form that this server did not make
    expect((await request('GET', `${server.url}/v1/files/${'0'.repeat(32)}.png`)).status).toBe(404);
  });

  it('answers bad requests with a 400 naming the field, and goes on serving', async () => {
    const cases: [unknown, string][] = [
      [{}, 'prompt'],
      [{ prompt: '' }, 'prompt'],
      [{ prompt: 3 }, 'prompt'],
      [{ prompt: 'x'.repeat(2001) }, 'prompt'],
      [{ prompt: 'a', n: 0 }, 'n'],
      [{ prompt: 'a', n: '2' }, 'n'],
      [{ prompt: 'a', n: 5 }, 'n'],
      [{ prompt: 'a', size: '100000x100000' }, 'size'],
      [{ prompt: 'a', size: '2048x2048' }, 'size'],
      [{ prompt: 'a', size: '65x64' }, 'size'],
      [{ prompt: 'a', size: '../../etc/passwd' }, 'size'],
      [{ prompt: 'a', steps: 51 }, 'steps'],
      [{ prompt: 'a', steps: 2.5 }, 'steps'],
      [{ prompt: 'a', seed: -1 }, 'seed'],
      [{ prompt: 'a', seed: 2 ** 48 }, 'seed'],
      [{ prompt: 'a', guidance: 'high' }, 'guidance'],
      [{ prompt: 'a', response_format: 'file' }, 'response_format'],
      [{ prompt: 'a', lora_scale: 'strong' }, 'lora_scale'],
      [{ prompt: 'a', lora_scale: 1e9 }, 'lora_scale'],
      [{ prompt: 'a', negative_prompt: ['x'] }, 'negative_prompt'],
      [{ prompt: 'a', path: '/etc/passwd' }, 'path'],
      ['{bad json', 'body'],
      ['[1, 2]', 'body'],
    ];
    for (const [body, param] of cases) {
      for (const route of ['/v1/images/generations', '/v1/jobs']) {
        const r = await request('POST', `${server.url}${route}`, body);
        expect(r.status, `${route} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`).toBe(400);
        expect(r.body.error.param, `${route} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`).toBe(param);
        expect(r.body.error.type).toBe('invalid_request_error');
      }
    }
    const huge = await request('POST', `${server.url}/v1/jobs`, JSON.stringify({ prompt: 'x'.repeat(10 * 2 ** 20) }));
    expect(huge.status).toBe(413);
    expect((await request('GET', `${server.url}/healthz`)).body.status).toBe('ok');
    expect((await request('POST', `${server.url}/v1/images/generations`, { prompt: 'still here', ...small })).status).toBe(200);
  });

  it('never lets a request name a path: ids and file names are looked up, not joined', async () => {
    const journal = readFileSync(join(server.options.outputDir, 'jobs.jsonl'), 'utf8');
    expect(journal.length).toBeGreaterThan(0);
    for (const path of [
      '/v1/files/..%2Fjobs.jsonl',
      '/v1/files/%2e%2e%2fjobs.jsonl',
      '/v1/files/..%2F..%2F..%2Fetc%2Fpasswd',
      '/v1/files/images%2F..%2F..%2Fjobs.jsonl',
      '/v1/jobs/..%2F..%2Fetc%2Fpasswd',
      '/v1/jobs/%2e%2e',
      '/v1/jobs/..%2Fjobs.jsonl/events',
      '/v1/files/x.png%00.png',
    ]) {
      const r = await request('GET', `${server.url}${path}`);
      expect([400, 404], `${path}: ${r.status}`).toContain(r.status);
      expect(JSON.stringify(r.body)).not.toContain('"request"');
      expect(JSON.stringify(r.body)).not.toContain('root:');
    }
  });

  it('serves /healthz, /metrics in Prometheus text, and the page', async () => {
    const metrics = await fetch(`${server.url}/metrics`, { signal: AbortSignal.timeout(60_000) });
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await metrics.text();
    expect(text).toMatch(/^dtorch_serve_queue_length 0$/m);
    expect(text).toMatch(/^dtorch_serve_jobs\{state="succeeded"\} [1-9]\d*$/m);
    expect(text).toMatch(/^dtorch_serve_step_seconds_count [1-9]\d*$/m);
    expect(text).toMatch(/^dtorch_serve_device_memory_bytes\{device="cpu:0"\} \d+$/m);
    const page = await fetch(`${server.url}/`, { signal: AbortSignal.timeout(60_000) });
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toContain('<form');
  });
});

describe('dtorch serve: edits', () => {
  let server: hf.ImageServer;
  let picture: Buffer;
  let mask: Buffer;
  beforeAll(async () => {
    server = await serve();
    picture = (await direct('a picture to edit', 21))[0]!;
    // white on the left half: redrawn there
    const m = new PNG({ width: 64, height: 64 });
    for (let i = 0; i < 64 * 64; i++) {
      m.data.fill(i % 64 < 32 ? 255 : 0, i * 4, i * 4 + 3);
      m.data[i * 4 + 3] = 255;
    }
    mask = PNG.sync.write(m);
  });
  afterAll(async () => {
    await server?.close();
  });

  function form(fields: Record<string, string | Buffer>): FormData {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) {
      if (typeof v === 'string') f.append(k, v);
      else f.append(k, new Blob([new Uint8Array(v)], { type: 'image/png' }), `${k}.png`);
    }
    return f;
  }

  async function post(path: string, fields: Record<string, string | Buffer>) {
    const res = await fetch(`${server.url}${path}`, { method: 'POST', body: form(fields), signal: AbortSignal.timeout(120_000) });
    return { status: res.status, body: await res.json() };
  }

  it('answers image to image and inpainting with the PNGs of the pipeline\'s variants at the same seed', async () => {
    const settings = { prompt: 'a dog', seed: 4, width: 64, height: 64, numInferenceSteps: 4, strength: 0.7, outputType: 'png' as const };
    const img2img = await post('/v1/images/edits', { prompt: 'a dog', image: picture, seed: '4', steps: '4', strength: '0.7', response_format: 'b64_json' });
    expect(img2img.status, JSON.stringify(img2img.body)).toBe(200);
    const expected = (await hf.FluxImg2ImgPipeline.fromPipe(pipe as hf.FluxPipeline).generate({ ...settings, image: picture })).images as Buffer[];
    expect(Buffer.from(img2img.body.data[0].b64_json, 'base64').equals(expected[0]!)).toBe(true);

    const inpaint = await post('/v1/images/edits', { prompt: 'a dog', image: picture, mask, seed: '4', steps: '4', strength: '0.7', n: '2', response_format: 'b64_json' });
    expect(inpaint.status, JSON.stringify(inpaint.body)).toBe(200);
    const expectedInpaint = (await hf.FluxInpaintPipeline.fromPipe(pipe as hf.FluxPipeline).generate({ ...settings, image: picture, maskImage: mask, numImagesPerPrompt: 2 })).images as Buffer[];
    expect(inpaint.body.data.map((d: { b64_json: string }, i: number) => Buffer.from(d.b64_json, 'base64').equals(expectedInpaint[i]!))).toEqual([true, true]);

    // as a job: an id at once, the result when it ends
    const job = await post('/v1/jobs/edits', { prompt: 'a dog', image: picture, seed: '4', steps: '4', strength: '0.7' });
    expect(job.status).toBe(202);
    expect(job.body.request.edit).toBe(true);
    const last = (await readEvents(`${server.url}/v1/jobs/${job.body.id}/events`)).at(-1)!;
    expect(last.data.state).toBe('succeeded');
    const png = Buffer.from(await (await fetch(`${server.url}${last.data.results[0].url}`, { signal: AbortSignal.timeout(60_000) })).arrayBuffer());
    expect(png.equals(expected[0]!)).toBe(true);
  });

  it('answers bad edits with a 400 naming the field', async () => {
    const cases: [Record<string, string | Buffer>, string][] = [
      [{ prompt: 'a dog' }, 'image'],
      [{ prompt: 'a dog', image: 'not a file' }, 'image'],
      [{ prompt: 'a dog', image: Buffer.from('not a picture at all') }, 'image'],
      [{ prompt: 'a dog', image: picture, mask: Buffer.from('nope') }, 'mask'],
      [{ prompt: 'a dog', image: picture, strength: '2' }, 'strength'],
      [{ prompt: 'a dog', image: picture, steps: 'many' }, 'steps'],
      [{ prompt: 'a dog', image: picture, size: '2048x2048' }, 'size'],
      [{ image: picture }, 'prompt'],
      [{ prompt: 'a dog', image: picture, path: '../../etc/passwd' }, 'path'],
    ];
    for (const [fields, param] of cases) {
      const r = await post('/v1/images/edits', fields);
      expect(r.status, `${JSON.stringify(Object.keys(fields))}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.error.param, JSON.stringify(r.body)).toBe(param);
    }
    // JSON cannot carry the picture
    const json = await request('POST', `${server.url}/v1/images/edits`, { prompt: 'a dog', image: 'cat.png' });
    expect(json.status).toBe(400);
    expect(json.body.error.param).toBe('image');
  });
});

describe('dtorch serve: jobs', () => {
  let server: hf.ImageServer;
  beforeAll(async () => {
    server = await serve({ maxQueue: 2 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('returns an id at once, streams progress step by step, and ends with the results', async () => {
    // a job ahead keeps this one queued until its stream is open: the stream sees every step
    const ahead = (await request('POST', `${server.url}/v1/jobs`, { prompt: 'ahead', size: '256x256', steps: 20 })).body;
    const posted = await request('POST', `${server.url}/v1/jobs`, { prompt: 'a blue square', seed: 3, size: '64x64', steps: 5 });
    expect(posted.status).toBe(202);
    expect(posted.body.state).toBe('queued');
    expect(posted.body.id).toMatch(/^[0-9a-f]{32}$/);
    expect(posted.headers.get('location')).toBe(`/v1/jobs/${posted.body.id}`);
    const events = await readEvents(`${server.url}/v1/jobs/${posted.body.id}/events`);
    const last = events.at(-1)!;
    expect(last.event).toBe('done');
    expect(last.data.state).toBe('succeeded');
    const progress = events.filter((e) => e.event === 'progress').map((e) => e.data.progress);
    // opened while the job waited: its state, then every step in order
    expect(events[0]!.event).toBe('state');
    expect(events[0]!.data.state).toBe('queued');
    expect(progress.map((p) => p.step)).toEqual([1, 2, 3, 4, 5]);
    expect(progress.every((p) => p.steps === 5)).toBe(true);
    expect(progress.at(-1)).toMatchObject({ step: 5, steps: 5, percent: 100 });
    expect(progress.at(-1).steps_per_second).toBeGreaterThan(0);
    expect(progress.at(-1).eta_seconds).toBe(0);
    expect((await readEvents(`${server.url}/v1/jobs/${ahead.id}/events`)).at(-1)!.data.state).toBe('succeeded');
    const job = (await request('GET', `${server.url}/v1/jobs/${posted.body.id}`)).body;
    expect(job.state).toBe('succeeded');
    expect(job.timings.denoise_ms).toBeGreaterThan(0);
    const png = Buffer.from(await (await fetch(`${server.url}${job.results[0].url}`, { signal: AbortSignal.timeout(60_000) })).arrayBuffer());
    expect(png.equals((await direct('a blue square', 3, 1, 64, 5))[0]!)).toBe(true);
    expect((await request('GET', `${server.url}/v1/jobs`)).body.data.map((j: { id: string }) => j.id)).toContain(posted.body.id);
  });

  it('cancels a running job between steps, a queued one at once, and answers 429 with Retry-After when the queue is full', async () => {
    const long = { prompt: 'a long one', size: '256x256', steps: 50 };
    const running = (await request('POST', `${server.url}/v1/jobs`, long)).body;
    // wait for its first step, so that it runs and the queue is empty again
    let cancelAfter: Promise<unknown> | undefined;
    const events = readEvents(`${server.url}/v1/jobs/${running.id}/events`, (e) => {
      if (e.event === 'progress' && !cancelAfter) cancelAfter = Promise.resolve();
    });
    for (let i = 0; i < 600 && !cancelAfter; i++) await new Promise((r) => setTimeout(r, 100));
    expect(cancelAfter, 'the job started').toBeDefined();
    const queued = [(await request('POST', `${server.url}/v1/jobs`, long)).body, (await request('POST', `${server.url}/v1/jobs`, long)).body];
    expect(queued.map((j) => j.state)).toEqual(['queued', 'queued']);
    const full = await request('POST', `${server.url}/v1/jobs`, long);
    expect(full.status).toBe(429);
    expect(Number(full.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(full.body.error.type).toBe('rate_limit_error');
    const sync = await request('POST', `${server.url}/v1/images/generations`, long);
    expect(sync.status).toBe(429);

    const cancelledQueued = await request('DELETE', `${server.url}/v1/jobs/${queued[1].id}`);
    expect(cancelledQueued.body.state).toBe('cancelled');
    const cancelledRunning = await request('DELETE', `${server.url}/v1/jobs/${running.id}`);
    expect(cancelledRunning.status).toBe(200);
    expect(cancelledRunning.body.state).toBe('cancelled');
    const last = (await events).at(-1)!;
    expect(last.event).toBe('done');
    expect(last.data.state).toBe('cancelled');
    // the other queued job runs next; cancel it too once it starts
    await request('DELETE', `${server.url}/v1/jobs/${queued[0].id}`);
    const again = await request('DELETE', `${server.url}/v1/jobs/${queued[0].id}`);
    expect(again.status).toBe(200);
    // a finished job cannot be cancelled
    const done = (await request('POST', `${server.url}/v1/images/generations`, { prompt: 'quick', ...small })).body;
    const late = await request('DELETE', `${server.url}/v1/jobs/${done.dtorch.job_id}`);
    expect(late.status).toBe(409);
    expect(late.body.error.param).toBe('id');
    for (const id of [running.id, queued[0].id, queued[1].id]) expect((await request('GET', `${server.url}/v1/jobs/${id}`)).body.state).toBe('cancelled');
  }, 300_000);
});

// the largest difference of two PNGs' pixels (a batch's float32 GEMMs may round a value differently)
function maxPixelDifference(a: Buffer, b: Buffer): number {
  const [x, y] = [PNG.sync.read(a).data, PNG.sync.read(b).data];
  let max = 0;
  for (let j = 0; j < x.length; j++) max = Math.max(max, Math.abs(x[j]! - y[j]!));
  return max;
}

describe('dtorch serve: batching', () => {
  it('runs queued requests of one size as one batch, with the images they make one by one', async () => {
    const server = await serve({ maxBatch: 4 });
    try {
      // a job of another size runs first, while the others queue up behind it
      const blocker = (await request('POST', `${server.url}/v1/jobs`, { prompt: 'first', size: '256x256', steps: 20 })).body;
      const asks = [
        { prompt: 'a red circle', seed: 11, n: 1 },
        { prompt: 'a green triangle', seed: 12, n: 2 },
        { prompt: 'a blue square', seed: 13, n: 1 },
      ];
      const jobs = [];
      for (const a of asks) jobs.push((await request('POST', `${server.url}/v1/jobs`, { ...a, ...small, response_format: 'url' })).body);
      const finals = await Promise.all([blocker, ...jobs].map(async (j) => (await readEvents(`${server.url}/v1/jobs/${j.id}/events`)).at(-1)!.data));
      expect(finals.map((f) => f.state)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
      expect(finals.slice(1).map((f) => f.batch_images), 'the three ran as one batch of 4 images').toEqual([4, 4, 4]);
      for (const [i, a] of asks.entries()) {
        const expected = await direct(a.prompt, a.seed, a.n);
        const got = await Promise.all(finals[i + 1].results.map(async (r: { url: string }) => Buffer.from(await (await fetch(`${server.url}${r.url}`, { signal: AbortSignal.timeout(60_000) })).arrayBuffer())));
        // a batch's float32 GEMMs may round a value differently: one level in a few pixels at most
        expect(got).toHaveLength(expected.length);
        for (const [k, png] of got.entries()) {
          const [x, y] = [PNG.sync.read(png).data, PNG.sync.read(expected[k]!).data];
          let max = 0;
          let differing = 0;
          for (let j = 0; j < x.length; j++) {
            const d = Math.abs(x[j]! - y[j]!);
            max = Math.max(max, d);
            if (d > 0) differing++;
          }
          expect(max, `${a.prompt} #${k}: batched as alone`).toBeLessThanOrEqual(1);
          expect(differing / x.length, `${a.prompt} #${k}: batched as alone`).toBeLessThan(0.01);
        }
      }
    } finally {
      await server.close();
    }
  }, 300_000);
});

describe('dtorch serve: batching over a dp mesh', () => {
  it('splits a batch over the dp dim, with the images of one device one by one', async () => {
    const dp = await hf.FluxPipeline.tiny({ mesh: new dt.DeviceMesh('cpu', [0, 1], ['dp']) });
    const server = await hf.createImageServer(new hf.PipelineRunner(dp), { port: 0, logLevel: 'silent', outputDir: join(work, `out-${dirs++}`), maxBatch: 4 });
    try {
      const blocker = (await request('POST', `${server.url}/v1/jobs`, { prompt: 'first', size: '256x256', steps: 20 })).body;
      const asks = [
        { prompt: 'a red circle', seed: 31, n: 1 },
        { prompt: 'a green triangle', seed: 32, n: 1 },
        { prompt: 'a blue square', seed: 33, n: 1 },
      ];
      const jobs = [];
      for (const a of asks) jobs.push((await request('POST', `${server.url}/v1/jobs`, { ...a, ...small })).body);
      const finals = await Promise.all([blocker, ...jobs].map(async (j) => (await readEvents(`${server.url}/v1/jobs/${j.id}/events`)).at(-1)!.data));
      expect(finals.map((f) => f.state), JSON.stringify(finals.map((f) => f.error))).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
      expect(finals.slice(1).map((f) => f.batch_images)).toEqual([3, 3, 3]);
      for (const [i, a] of asks.entries()) {
        const [expected] = await direct(a.prompt, a.seed);
        const got = Buffer.from(await (await fetch(`${server.url}${finals[i + 1].results[0].url}`, { signal: AbortSignal.timeout(60_000) })).arrayBuffer());
        expect(maxPixelDifference(got, expected!), `${a.prompt}: on dp=2 in a batch as on one device alone`).toBeLessThanOrEqual(1);
      }
      // an edit is one call of n images: on dp=2 an odd n is refused at once, naming n
      const form = new FormData();
      form.append('prompt', 'a dog');
      form.append('image', new Blob([new Uint8Array((await direct('a picture', 1))[0]!)], { type: 'image/png' }), 'image.png');
      const odd = await fetch(`${server.url}/v1/images/edits`, { method: 'POST', body: form, signal: AbortSignal.timeout(60_000) });
      expect(odd.status).toBe(400);
      expect(((await odd.json()) as { error: { param: string } }).error.param).toBe('n');
    } finally {
      await server.close();
      dp.dispose();
    }
  }, 300_000);
});

describe('dtorch serve: LoRA', () => {
  const style = fileURLToPath(new URL('../fixtures/hf/lora/flux-style.safetensors', import.meta.url));

  it('runs the adapters the server loaded, scaled per request by lora_scale, as pipe.generate({ loraScale }); the command loads them with --lora', async () => {
    const lora = await hf.FluxPipeline.tiny();
    await lora.loadLoraWeights(style, { adapterName: 'style' });
    const server = await hf.createImageServer(new hf.PipelineRunner(lora), { port: 0, logLevel: 'silent', outputDir: join(work, `out-${dirs++}`) });
    const settings = { prompt: 'a styled cat', seed: 9, width: 64, height: 64, numInferenceSteps: 3, outputType: 'png' as const };
    let child: ServeChild | undefined;
    try {
      const half = await request('POST', `${server.url}/v1/images/generations`, { prompt: 'a styled cat', seed: 9, lora_scale: 0.5, response_format: 'b64_json', ...small });
      expect(half.status, JSON.stringify(half.body)).toBe(200);
      const expectedHalf = ((await lora.generate({ ...settings, loraScale: 0.5 })).images as Buffer[])[0]!;
      expect(Buffer.from(half.body.data[0].b64_json, 'base64').equals(expectedHalf)).toBe(true);
      const full = await request('POST', `${server.url}/v1/images/generations`, { prompt: 'a styled cat', seed: 9, response_format: 'b64_json', ...small });
      const expectedFull = ((await lora.generate(settings)).images as Buffer[])[0]!;
      expect(Buffer.from(full.body.data[0].b64_json, 'base64').equals(expectedFull)).toBe(true);
      expect(expectedFull.equals(expectedHalf), 'the scale changes the image').toBe(false);
      expect(expectedFull.equals((await direct('a styled cat', 9))[0]!), 'the adapter changes the image').toBe(false);

      checkBuilt();
      child = await startServe(work, ['--model', 'tiny-flux', '--lora', `${style}:0.5`, '--output-dir', join(work, 'lora-child')]);
      const viaCommand = await request('POST', `${child.url}/v1/images/generations`, { prompt: 'a styled cat', seed: 9, response_format: 'b64_json', ...small });
      expect(viaCommand.status, JSON.stringify(viaCommand.body)).toBe(200);
      // --lora FILE:0.5 weighs the adapter 0.5: the image of loraScale 0.5 over weight 1
      expect(Buffer.from(viaCommand.body.data[0].b64_json, 'base64').equals(expectedHalf)).toBe(true);
    } finally {
      if (child) {
        child.child.kill('SIGTERM');
        await child.exited();
      }
      await server.close();
      lora.dispose();
    }
  }, 300_000);
});

describe('dtorch serve: a LoRA per request', () => {
  const style = fileURLToPath(new URL('../fixtures/hf/lora/flux-style.safetensors', import.meta.url));
  const detail = fileURLToPath(new URL('../fixtures/hf/lora/flux-detail.safetensors', import.meta.url));
  // the server's pipeline (style at 0.7 active, detail loaded and off) and the references' (the same files, set by hand)
  let served: hf.FluxPipeline;
  let ref: hf.FluxPipeline;
  let server: hf.ImageServer;
  beforeAll(async () => {
    served = await hf.FluxPipeline.tiny();
    ref = await hf.FluxPipeline.tiny();
    for (const p of [served, ref]) {
      await p.loadLoraWeights(style, { adapterName: 'style' });
      await p.loadLoraWeights(detail, { adapterName: 'detail' });
    }
    served.setAdapters(['style'], [0.7]);
    server = await hf.createImageServer(new hf.PipelineRunner(served, {}, { loraSources: { style } }), { port: 0, logLevel: 'silent', outputDir: join(work, `out-${dirs++}`), maxBatch: 4 });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    served?.dispose();
    ref?.dispose();
  });

  // what the reference pipeline makes with adapters `names` at `weights`
  async function withAdapters(names: string[], weights: number[], prompt: string, seed: number): Promise<Buffer> {
    ref.setAdapters(names, weights);
    const { images } = await ref.generate({ prompt, seed, width: 64, height: 64, numInferenceSteps: 3, outputType: 'png' });
    return (images as Buffer[])[0]!;
  }

  async function generated(body: object): Promise<{ png: Buffer; job: string }> {
    const r = await request('POST', `${server.url}/v1/images/generations`, { ...small, ...body, response_format: 'b64_json' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return { png: Buffer.from(r.body.data[0].b64_json, 'base64'), job: r.body.dtorch.job_id };
  }

  it('lists the loaded adapters at GET /v1/loras: name, source, default scale, whether they run by default', async () => {
    const r = await request('GET', `${server.url}/v1/loras`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      object: 'list',
      data: [
        { object: 'lora', name: 'style', source: style, scale: 0.7, default: true },
        { object: 'lora', name: 'detail', source: null, scale: 1, default: false },
      ],
      fused: false,
    });
  });

  it('runs the adapters a request names as setAdapters with the same weights and seed; [] as no adapter; the server\'s when it names none', async () => {
    const prompt = 'a styled cat';
    // in an order that changes the adapters before each job, and back
    const detailed = await generated({ prompt, seed: 9, lora: [{ name: 'detail', scale: 0.8 }] });
    const none = await generated({ prompt, seed: 9, lora: [] });
    const byDefault = await generated({ prompt, seed: 9 });
    const detailByName = await generated({ prompt, seed: 9, lora: 'detail' });
    const both = await generated({ prompt, seed: 9, lora: [{ name: 'detail', scale: 0.5 }, { name: 'style', scale: 0.8 }] });
    const byDefaultAgain = await generated({ prompt, seed: 9 });

    const expectedDetail = await withAdapters(['detail'], [0.8], prompt, 9);
    expect(detailed.png.equals(expectedDetail), 'detail x0.8').toBe(true);
    const [plain] = await direct(prompt, 9);
    expect(none.png.equals(plain!), 'lora: [] as a pipeline without adapters').toBe(true);
    const expectedDefault = await withAdapters(['style'], [0.7], prompt, 9);
    expect(byDefault.png.equals(expectedDefault), 'the default: style x0.7').toBe(true);
    expect(byDefaultAgain.png.equals(expectedDefault), 'the default again after other choices').toBe(true);
    // a name alone: its default scale (1 for one the server does not run by default)
    expect(detailByName.png.equals(await withAdapters(['detail'], [1], prompt, 9)), 'detail x1').toBe(true);
    expect(both.png.equals(await withAdapters(['style', 'detail'], [0.8, 0.5], prompt, 9)), 'style x0.8 + detail x0.5').toBe(true);
    // each choice makes another image (else the comparisons above would prove nothing)
    const pngs = [detailed, none, byDefault, detailByName, both].map((g) => g.png.toString('base64'));
    expect(new Set(pngs).size).toBe(5);

    // the job shows its choice, resolved: names and weights, in the order the adapters were loaded
    const view = async (id: string) => (await request('GET', `${server.url}/v1/jobs/${id}`)).body.request.lora;
    expect(await view(byDefault.job)).toEqual([{ name: 'style', scale: 0.7 }]);
    expect(await view(none.job)).toEqual([]);
    expect(await view(both.job)).toEqual([{ name: 'style', scale: 0.8 }, { name: 'detail', scale: 0.5 }]);
  }, 300_000);

  it('batches only requests with the same adapters, each image as its adapters make it alone', async () => {
    // a job of another size runs first, while the others queue up behind it
    const blocker = (await request('POST', `${server.url}/v1/jobs`, { prompt: 'first', size: '256x256', steps: 20, lora: [] })).body;
    const asks = [
      { prompt: 'a red circle', seed: 21, lora: 'detail', names: ['detail'], weights: [1] },
      { prompt: 'a green triangle', seed: 22, lora: [], names: [], weights: [] },
      { prompt: 'a blue square', seed: 23, lora: 'detail', names: ['detail'], weights: [1] },
      { prompt: 'a yellow star', seed: 24, lora: undefined, names: ['style'], weights: [0.7] },
    ];
    const jobs = [];
    for (const a of asks) jobs.push((await request('POST', `${server.url}/v1/jobs`, { prompt: a.prompt, seed: a.seed, ...(a.lora !== undefined && { lora: a.lora }), ...small })).body);
    const finals = await Promise.all([blocker, ...jobs].map(async (j) => (await readEvents(`${server.url}/v1/jobs/${j.id}/events`)).at(-1)!.data));
    expect(finals.map((f) => f.state), JSON.stringify(finals.map((f) => f.error))).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(finals.slice(1).map((f) => f.batch_images), 'the two detail requests ran as one batch, the others alone').toEqual([2, 1, 2, 1]);
    for (const [i, a] of asks.entries()) {
      const got = Buffer.from(await (await fetch(`${server.url}${finals[i + 1].results[0].url}`, { signal: AbortSignal.timeout(60_000) })).arrayBuffer());
      const expected = a.names.length ? await withAdapters(a.names, a.weights, a.prompt, a.seed) : (await direct(a.prompt, a.seed))[0]!;
      expect(maxPixelDifference(got, expected), `${a.prompt}: with ${JSON.stringify(a.names)} as alone`).toBeLessThanOrEqual(1);
    }
  }, 300_000);

  it('runs an edit with the adapters its form names (a name or a JSON list)', async () => {
    const picture = (await direct('a picture to edit', 21))[0]!;
    const f = new FormData();
    for (const [k, v] of Object.entries({ prompt: 'a dog', seed: '4', steps: '3', strength: '0.7', response_format: 'b64_json', lora: '[{"name": "detail", "scale": 0.8}]' })) f.append(k, v);
    f.append('image', new Blob([new Uint8Array(picture)], { type: 'image/png' }), 'image.png');
    const res = await fetch(`${server.url}/v1/images/edits`, { method: 'POST', body: f, signal: AbortSignal.timeout(120_000) });
    const body = (await res.json()) as { data: { b64_json: string }[] };
    expect(res.status, JSON.stringify(body)).toBe(200);
    ref.setAdapters(['detail'], [0.8]);
    const expected = (await hf.FluxImg2ImgPipeline.fromPipe(ref).generate({ prompt: 'a dog', seed: 4, width: 64, height: 64, numInferenceSteps: 3, strength: 0.7, image: picture, outputType: 'png' })).images as Buffer[];
    expect(Buffer.from(body.data[0]!.b64_json, 'base64').equals(expected[0]!)).toBe(true);
  }, 300_000);

  it('answers an unknown adapter, a name twice or a bad scale with a 400 naming lora, and goes on serving', async () => {
    const cases: [unknown, string][] = [
      [{ prompt: 'a', lora: 'nope' }, 'lora'],
      [{ prompt: 'a', lora: [{ name: 'nope', scale: 1 }] }, 'lora'],
      [{ prompt: 'a', lora: ['style', 'nope'] }, 'lora'],
      [{ prompt: 'a', lora: ['style', { name: 'style', scale: 0.5 }] }, 'lora'],
      [{ prompt: 'a', lora: [{ name: 'style', scale: 1e9 }] }, 'lora.0.scale'],
      [{ prompt: 'a', lora: [{ name: 'style', scale: 'strong' }] }, 'lora.0.scale'],
      [{ prompt: 'a', lora: [{ scale: 0.5 }] }, 'lora.0.name'],
      [{ prompt: 'a', lora: [{ name: 'style', path: '/etc/passwd' }] }, 'lora.0.path'],
      [{ prompt: 'a', lora: 3 }, 'lora'],
      [{ prompt: 'a', lora: { name: 'style' } }, 'lora'],
    ];
    for (const [body, param] of cases) {
      for (const route of ['/v1/images/generations', '/v1/jobs']) {
        const r = await request('POST', `${server.url}${route}`, body);
        expect(r.status, `${route} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`).toBe(400);
        expect(r.body.error.param, `${route} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`).toBe(param);
      }
    }
    const unknown = await request('POST', `${server.url}/v1/jobs`, { prompt: 'a', lora: 'nope' });
    expect(unknown.body.error.message).toMatch(/no LoRA adapter named "nope".*loaded: "style", "detail"/);
    // a form's lora that is no JSON list, an unknown name in a form
    for (const lora of ['[{"name": ', 'nope']) {
      const f = new FormData();
      f.append('prompt', 'a dog');
      f.append('lora', lora);
      f.append('image', new Blob([new Uint8Array((await direct('a picture', 1))[0]!)], { type: 'image/png' }), 'image.png');
      const res = await fetch(`${server.url}/v1/jobs/edits`, { method: 'POST', body: f, signal: AbortSignal.timeout(60_000) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { param: string } }).error.param).toBe('lora');
    }
    expect((await request('POST', `${server.url}/v1/images/generations`, { prompt: 'still here', lora: 'style', ...small })).status).toBe(200);

    // a server with no adapters: none asked is fine, a name is a 400 naming lora
    const plain = await serve();
    try {
      expect((await request('GET', `${plain.url}/v1/loras`)).body.data).toEqual([]);
      const r = await request('POST', `${plain.url}/v1/jobs`, { prompt: 'a', lora: 'style' });
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe('lora');
      expect(r.body.error.message).toMatch(/it has none/);
      expect((await request('POST', `${plain.url}/v1/images/generations`, { prompt: 'a', lora: [], ...small })).status).toBe(200);
    } finally {
      await plain.close();
    }
  }, 300_000);

  it('refuses another choice when the adapters are fused into the weights (400 naming lora)', async () => {
    const fused = await hf.FluxPipeline.tiny();
    await fused.loadLoraWeights(style, { adapterName: 'style' });
    fused.fuseLora();
    const s = await hf.createImageServer(new hf.PipelineRunner(fused), { port: 0, logLevel: 'silent', outputDir: join(work, `out-${dirs++}`) });
    try {
      expect((await request('GET', `${s.url}/v1/loras`)).body.fused).toBe(true);
      for (const lora of [[], 'style:0.5', [{ name: 'style', scale: 0.5 }]]) {
        const r = await request('POST', `${s.url}/v1/jobs`, { prompt: 'a', lora });
        expect(r.status, JSON.stringify(r.body)).toBe(400);
        expect(r.body.error.param).toBe('lora');
      }
      expect((await request('POST', `${s.url}/v1/jobs`, { prompt: 'a', lora: [] })).body.error.message).toMatch(/fused into the weights/);
      // the choice it runs anyway is accepted
      expect((await request('POST', `${s.url}/v1/images/generations`, { prompt: 'a', lora: 'style', ...small })).status).toBe(200);
    } finally {
      await s.close();
      fused.dispose();
    }
  }, 300_000);

  it('the command names adapters with --lora NAME=PATH[:SCALE], runs them by default, and a request chooses among them', async () => {
    checkBuilt();
    const child = await startServe(work, ['--model', 'tiny-flux', '--lora', `look=${style}:0.5`, '--lora', `fine=${detail}`, '--output-dir', join(work, 'lora-named-child')]);
    try {
      const listed = await request('GET', `${child.url}/v1/loras`);
      expect(listed.body.data.map((l: { name: string; source: string; scale: number; default: boolean }) => [l.name, l.source, l.scale, l.default])).toEqual([
        ['look', style, 0.5, true],
        ['fine', detail, 1, true],
      ]);
      const ask = async (body: object) => Buffer.from((await request('POST', `${child.url}/v1/images/generations`, { prompt: 'a styled cat', seed: 9, response_format: 'b64_json', ...small, ...body })).body.data[0].b64_json, 'base64');
      expect((await ask({ lora: 'fine' })).equals(await withAdapters(['detail'], [1], 'a styled cat', 9)), 'fine alone').toBe(true);
      expect((await ask({})).equals(await withAdapters(['style', 'detail'], [0.5, 1], 'a styled cat', 9)), 'both, as --lora set them').toBe(true);
    } finally {
      child.child.kill('SIGTERM');
      await child.exited();
    }
  }, 300_000);
});

describe('dtorch serve: retention', () => {
  it('keeps the latest keepJobs finished jobs: an older one is forgotten with its files, after a restart too', async () => {
    const server = await serve({ keepJobs: 2 });
    const dir = server.options.outputDir;
    try {
      const answers = [];
      for (const seed of [1, 2, 3]) answers.push((await request('POST', `${server.url}/v1/images/generations`, { prompt: 'kept?', seed, response_format: 'url', ...small })).body);
      const [oldest, ...kept] = answers;
      expect((await request('GET', `${server.url}/v1/jobs/${oldest.dtorch.job_id}`)).status).toBe(404);
      expect((await fetch(oldest.data[0].url, { signal: AbortSignal.timeout(60_000) })).status).toBe(404);
      const oldestName = (oldest.data[0].url as string).split('/').at(-1)!;
      expect(readdirSync(join(dir, 'images'))).not.toContain(oldestName);
      for (const a of kept) expect((await fetch(a.data[0].url, { signal: AbortSignal.timeout(60_000) })).status).toBe(200);
      expect((await request('GET', `${server.url}/v1/jobs`)).body.data.map((j: { id: string }) => j.id)).toEqual(kept.reverse().map((a) => a.dtorch.job_id));
    } finally {
      await server.close();
    }
    // the journal read back keeps the same two, and one job fewer with keepJobs 1
    expect(new hf.JobStore(dir, 2).list()).toHaveLength(2);
    const one = new hf.JobStore(dir, 1).list();
    expect(one).toHaveLength(1);
    expect(readdirSync(join(dir, 'images'))).toEqual(one[0]!.files);
    expect(readFileSync(join(dir, 'jobs.jsonl'), 'utf8').trim().split('\n')).toHaveLength(1);
  });
});

describe('dtorch serve: the token', () => {
  it('is required off loopback: the options and the command refuse to start without one', () => {
    expect(() => hf.checkServeOptions({ host: '0.0.0.0' })).toThrow(/not a loopback address.*--token-file/);
    expect(() => hf.checkServeOptions({ host: '::' })).toThrow(dt.DTorchError);
    expect(() => hf.checkServeOptions({ host: '192.168.1.5', token: 'short' })).toThrow(/at least 16 characters/);
    expect(hf.checkServeOptions({ host: '0.0.0.0', token: 'a'.repeat(32) }).token).toBe('a'.repeat(32));
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', '[::1]']) expect(hf.isLoopback(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '::ffff:10.0.0.1']) expect(hf.isLoopback(host), host).toBe(false);
    checkBuilt();
    const r = runDtorch(work, ['serve', '--model', 'tiny-flux', '--host', '0.0.0.0', '--port', '0']);
    expectOneLineError(r, /--host 0\.0\.0\.0 is not a loopback address.*--token-file/);
    expect(r.stdout, 'refused before loading').not.toContain('loading');
  });

  it('compares the whole token whatever its length, never throwing on a length mismatch', () => {
    const token = 'f'.repeat(64);
    expect(hf.tokenMatches(token, token)).toBe(true);
    expect(hf.tokenMatches(token.slice(0, 63), token)).toBe(false);
    expect(hf.tokenMatches(`${token}f`, token)).toBe(false);
    expect(hf.tokenMatches('', token)).toBe(false);
    expect(hf.tokenMatches(`${'f'.repeat(63)}e`, token)).toBe(false);
    expect(hf.authorized(`Bearer ${token}`, token)).toBe(true);
    expect(hf.authorized(`bearer ${token}`, token)).toBe(true);
    expect(hf.authorized(token, token)).toBe(false);
    expect(hf.authorized(undefined, token)).toBe(false);
    expect(hf.authorized(`Basic ${token}`, token)).toBe(false);
  });

  it('guards the API: 401 without it or with a wrong one, 200 with it', async () => {
    const token = 'secret-token-0123456789abcdef';
    const server = await serve({ token });
    try {
      const body = { prompt: 'a cat', ...small };
      const none = await request('POST', `${server.url}/v1/images/generations`, body);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toBe('Bearer');
      expect((await request('POST', `${server.url}/v1/jobs`, body, { authorization: 'Bearer wrong-token-0123456789abcdef' })).status).toBe(401);
      expect((await request('GET', `${server.url}/v1/jobs`, undefined, { authorization: `Bearer ${token.slice(0, -1)}` })).status).toBe(401);
      const ok = await request('POST', `${server.url}/v1/images/generations`, { ...body, response_format: 'url' }, { authorization: `Bearer ${token}` });
      expect(ok.status).toBe(200);
      // a result URL is a capability of its own (an <img> cannot send the header)
      expect((await fetch(ok.body.data[0].url, { signal: AbortSignal.timeout(60_000) })).status).toBe(200);
      expect((await request('GET', `${server.url}/healthz`)).body.auth).toBe(true);
    } finally {
      await server.close();
    }
  });
});

describe('dtorch serve: the command, stopped', () => {
  let child: ServeChild | undefined;
  afterAll(() => {
    if (child && child.child.exitCode === null) child.child.kill('SIGKILL');
  });

  it('on SIGTERM finishes the running job, cancels the queued ones and exits 0; a SIGKILL leaves jobs that a restart lists failed', async () => {
    checkBuilt();
    const out = join(work, 'child-out');
    child = await startServe(work, ['--model', 'tiny-flux', '--output-dir', out]);
    const long = { prompt: 'a long one', size: '128x128', steps: 40 };
    const running = (await request('POST', `${child.url}/v1/jobs`, long)).body;
    const queued = (await request('POST', `${child.url}/v1/jobs`, long)).body;
    let started = false;
    const events = readEvents(`${child.url}/v1/jobs/${running.id}/events`, (e) => {
      if (e.event === 'progress' && !started) {
        started = true;
        child!.child.kill('SIGTERM');
      }
    });
    expect((await events).at(-1)!.data.state, 'the running job finished').toBe('succeeded');
    expect(await child.exited(), child.output()).toBe(0);
    expect(child.output()).toContain('every accepted job has a final state');

    // restarted on the same folder: both jobs are there, final
    child = await startServe(work, ['--model', 'tiny-flux', '--output-dir', out]);
    const after = await Promise.all([running.id, queued.id].map(async (id) => (await request('GET', `${child!.url}/v1/jobs/${id}`)).body));
    expect(after.map((j) => j.state)).toEqual(['succeeded', 'cancelled']);
    expect(after[1].error.code).toBe('SHUTDOWN');
    expect((await fetch(`${child.url}${after[0].results[0].url}`, { signal: AbortSignal.timeout(60_000) })).status).toBe(200);

    // SIGKILL mid-job: the running job and a queued one are listed failed after a restart
    const killed = (await request('POST', `${child.url}/v1/jobs`, { ...long, steps: 50, size: '256x256' })).body;
    const waiting = (await request('POST', `${child.url}/v1/jobs`, long)).body;
    let running2 = false;
    for (let i = 0; i < 600 && !running2; i++) {
      running2 = (await request('GET', `${child.url}/v1/jobs/${killed.id}`)).body.state === 'running';
      if (!running2) await new Promise((r) => setTimeout(r, 100));
    }
    expect(running2).toBe(true);
    child.child.kill('SIGKILL');
    expect(await child.exited()).toBe(null);
    child = await startServe(work, ['--model', 'tiny-flux', '--output-dir', out]);
    const listed = (await request('GET', `${child.url}/v1/jobs`)).body.data as { id: string; state: string; error: { code: string; message: string } | null }[];
    const byId = new Map(listed.map((j) => [j.id, j]));
    for (const id of [killed.id, waiting.id]) {
      expect(byId.get(id)?.state, id).toBe('failed');
      expect(byId.get(id)?.error?.code).toBe('INTERRUPTED');
    }
    expect(byId.get(killed.id)?.error?.message).toMatch(/while this job was running/);
    expect(byId.get(waiting.id)?.error?.message).toMatch(/while this job was queued/);
    expect(byId.get(running.id)?.state).toBe('succeeded');
    child.child.kill('SIGTERM');
    expect(await child.exited()).toBe(0);
  }, 600_000);

  it('reads its token from --token-file and refuses an empty one', () => {
    const empty = join(work, 'empty-token');
    writeFileSync(empty, '\n');
    expectOneLineError(runDtorch(work, ['serve', '--model', 'tiny-flux', '--token-file', empty]), /first line is empty/);
    expectOneLineError(runDtorch(work, ['serve', '--model', 'tiny-flux', '--token-file', join(work, 'missing')]), /cannot be read/);
  });
});
