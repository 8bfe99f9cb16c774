/// <reference lib="dom" />
// (the functions given to page.evaluate run in the browser)
// `dtorch serve`'s web page in a real headless browser: Debian's chromium driven by
// puppeteer-core (no browser download: .ci/run installs the chromium package). Type a prompt,
// submit, see the progress bar reach 100% and the image appear in the result and the gallery; edit
// a picture with a mask through the file pickers;
// start a long job and cancel it from the page; choose the LoRA adapter a job runs with. Skipped, saying why, only when no chromium binary
// exists.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer, { type Browser, type ElementHandle, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as hf from '@dtorch/hf';

const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
if (!chromium) console.warn('serve_page.test.ts: skipped: no chromium binary (/usr/bin/chromium); install it with apt-get install -y chromium');

describe.skipIf(!chromium)('dtorch serve: the web page in headless chromium', () => {
  const work = mkdtempSync(join(tmpdir(), 'dtorch-serve-page-'));
  let pipe: hf.DiffusionPipeline;
  let server: hf.ImageServer;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    pipe = await hf.FluxPipeline.tiny();
    // an adapter the page offers beside the server's default and none
    await pipe.loadLoraWeights(fileURLToPath(new URL('../fixtures/hf/lora/flux-style.safetensors', import.meta.url)), { adapterName: 'style' });
    pipe.setAdapters('style', 0.5);
    server = await hf.createImageServer(new hf.PipelineRunner(pipe), { port: 0, logLevel: 'silent', outputDir: join(work, 'out') }, 'tiny-flux');
    // root in CI: chromium's sandbox needs a user namespace it may not have
    browser = await puppeteer.launch({ executablePath: chromium!, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'], timeout: 120_000 });
    page = await browser.newPage();
    page.setDefaultTimeout(180_000);
    await page.goto(`${server.url}/`, { waitUntil: 'networkidle0' });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    pipe?.dispose();
    rmSync(work, { recursive: true, force: true });
  });

  it('generates: the progress reaches 100% and the image appears', async () => {
    await page.waitForFunction(() => document.getElementById('model')!.textContent!.includes('tiny-flux'));
    await page.type('#prompt', 'a red circle on a blue background');
    await page.select('#size', '64x64');
    await page.$eval('#steps', (el) => ((el as HTMLInputElement).value = '6'));
    await page.$eval('#seed', (el) => ((el as HTMLInputElement).value = '5'));
    // the progress values the page showed, as the event stream moved it
    await page.evaluate(() => {
      (window as unknown as { seen: number[] }).seen = [];
      new MutationObserver(() => (window as unknown as { seen: number[] }).seen.push((document.getElementById('progress') as HTMLProgressElement).value)).observe(document.getElementById('status')!, { childList: true, characterData: true, subtree: true });
    });
    await page.click('#generate');
    await page.waitForFunction(() => (document.querySelector('#result img.result') as HTMLImageElement | null)?.complete === true && (document.querySelector('#result img.result') as HTMLImageElement).naturalWidth > 0);
    expect(await page.$eval('#progress', (el) => (el as HTMLProgressElement).value)).toBe(100);
    expect(await page.$eval('#status', (el) => el.textContent)).toMatch(/^done: 100%/);
    expect(await page.$eval('#result img.result', (el) => [(el as HTMLImageElement).naturalWidth, (el as HTMLImageElement).naturalHeight])).toEqual([64, 64]);
    expect(await page.$$eval('#gallery img', (els) => els.length)).toBe(1);
    const seen = await page.evaluate(() => (window as unknown as { seen: number[] }).seen);
    expect(seen.at(-1)).toBe(100);
    // the image is the job's: the one the API lists
    const src = await page.$eval('#result img.result', (el) => (el as HTMLImageElement).getAttribute('src'));
    const job = server.store.list()[0]!;
    expect(job.state).toBe('succeeded');
    expect(src).toBe(`/v1/files/${job.files[0]}`);
    expect(job.request.seed).toBe(5);
  });

  it('edits a picture with a mask: the image and mask pickers send a multipart job', async () => {
    const picture = join(work, 'picture.png');
    const { images } = await pipe.generate({ prompt: 'a picture', seed: 2, width: 64, height: 64, numInferenceSteps: 3, outputType: 'png' });
    writeFileSync(picture, (images as Buffer[])[0]!);
    await page.$eval('#prompt', (el) => ((el as HTMLTextAreaElement).value = 'a dog'));
    await page.select('#size', '64x64');
    await page.$eval('#steps', (el) => ((el as HTMLInputElement).value = '4'));
    await ((await page.$('#image')) as ElementHandle<HTMLInputElement>).uploadFile(picture);
    await ((await page.$('#mask')) as ElementHandle<HTMLInputElement>).uploadFile(picture);
    const before = await page.$$eval('#gallery img', (els) => els.length);
    await page.click('#generate');
    await page.waitForFunction((n) => document.querySelectorAll('#gallery img').length === n + 1, {}, before);
    await page.waitForFunction(() => (document.querySelector('#result img.result') as HTMLImageElement | null)?.complete === true && (document.querySelector('#result img.result') as HTMLImageElement).naturalWidth > 0);
    expect(await page.$eval('#progress', (el) => (el as HTMLProgressElement).value)).toBe(100);
    const job = server.store.list()[0]!;
    expect(job.state).toBe('succeeded');
    expect(job.request.imagePath).toBeDefined();
    expect(job.request.maskPath).toBeDefined();
    expect(job.request.strength).toBe(0.6);
    // back to text to image for what follows
    await page.$eval('#image', (el) => ((el as HTMLInputElement).value = ''));
    await page.$eval('#mask', (el) => ((el as HTMLInputElement).value = ''));
  });

  it('chooses the LoRA adapters a job runs with: the server\'s default, none, or one of them', async () => {
    await page.waitForFunction(() => !document.getElementById('lora')!.hidden);
    expect(await page.$$eval('#lora option', (els) => els.map((o) => o.textContent))).toEqual(['server default', 'none', 'style x0.5']);
    await page.$eval('#prompt', (el) => ((el as HTMLTextAreaElement).value = 'a styled cat'));
    await page.select('#size', '64x64');
    await page.$eval('#steps', (el) => ((el as HTMLInputElement).value = '2'));
    const chosen: unknown[] = [];
    for (const label of ['none', 'style x0.5', 'server default']) {
      const value = await page.$$eval('#lora option', (els, l) => (els as HTMLOptionElement[]).find((o) => o.textContent === l)!.value, label);
      await page.select('#lora', value);
      const before = server.store.list().length;
      await page.click('#generate');
      await page.waitForFunction(() => !(document.getElementById('generate') as HTMLButtonElement).disabled);
      const job = server.store.list()[0]!;
      expect(server.store.list().length).toBe(before + 1);
      expect(job.state, JSON.stringify(job.error)).toBe('succeeded');
      chosen.push(job.request.lora);
    }
    expect(chosen).toEqual([[], [{ name: 'style', scale: 0.5 }], [{ name: 'style', scale: 0.5 }]]);
  });

  it('cancels a running job from the page', async () => {
    await page.$eval('#prompt', (el) => ((el as HTMLTextAreaElement).value = 'a long one'));
    await page.select('#size', '256x256');
    await page.$eval('#steps', (el) => ((el as HTMLInputElement).value = '50'));
    await page.click('#generate');
    await page.waitForFunction(() => /^step \d+\/50/.test(document.getElementById('status')!.textContent!));
    await page.click('#cancel');
    await page.waitForFunction(() => document.getElementById('status')!.textContent === 'cancelled');
    expect(await page.$eval('#error', (el) => el.textContent)).toMatch(/cancelled/);
    expect(await page.$eval('#generate', (el) => (el as HTMLButtonElement).disabled)).toBe(false);
    expect(server.store.list()[0]!.state).toBe('cancelled');
    expect(await page.$$eval('#gallery img', (els) => els.length), 'the gallery keeps the earlier images only').toBe(5);
  });
});
