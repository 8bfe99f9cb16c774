// The `dtorch` command run as a child process (node packages/hf/dist/cli/main.js ...), as a user
// runs it: `info` prints the versions, `generate --model tiny-flux` writes PNGs that decode to
// the requested size, and each error is one line on stderr with a non-zero exit code.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as hf from '@dtorch/hf';
import { saveTinyPipeline } from './save_tiny_pipeline.js';

const main = fileURLToPath(new URL('../../packages/hf/dist/cli/main.js', import.meta.url));
const bin = fileURLToPath(new URL('../../packages/hf/bin/dtorch.js', import.meta.url));
const hfPackage = JSON.parse(readFileSync(fileURLToPath(new URL('../../packages/hf/package.json', import.meta.url)), 'utf8')) as { version: string };
const work = mkdtempSync(join(tmpdir(), 'dtorch-cli-'));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function dtorch(args: string[], env: Record<string, string> = {}): Run {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, HF_HOME: join(work, 'hf-home'), HF_HUB_OFFLINE: '1' };
  delete childEnv['DTORCH_LOG'];
  Object.assign(childEnv, env);
  const r = spawnSync(process.execPath, [main, ...args], { env: childEnv, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** An error run: exit code 1, and stderr one line starting `error: `, with no stack. */
function expectOneLineError(r: Run, pattern: RegExp): void {
  expect(r.status, r.stderr).toBe(1);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^error: /);
  expect(lines[0]).toMatch(pattern);
}

function decodePng(path: string): { width: number; height: number } {
  const png = PNG.sync.read(readFileSync(path));
  return { width: png.width, height: png.height };
}

beforeAll(() => {
  if (!existsSync(main)) throw new Error(`${main} is missing: build @dtorch/hf first (npm run build)`);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('dtorch info', () => {
  it('exits 0 and prints the DTorch and LibTorch versions, CUDA, NCCL and the devices', () => {
    const r = dtorch(['info']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`DTorch ${hfPackage.version}`);
    expect(r.stdout).toMatch(/^LibTorch \d+\.\d+\.\d+/m);
    expect(r.stdout).toMatch(/^CUDA: /m);
    expect(r.stdout).toMatch(/^NCCL: /m);
    const cpu = /^ {2}cpu:0-(\d+) \d+ cores, [\d.]+ GiB host memory .* shared by the (\d+) CPU devices/m.exec(r.stdout);
    expect(cpu, r.stdout).not.toBe(null);
    expect(Number(cpu![1]) + 1).toBe(Number(cpu![2]));
    // the CPU devices DTORCH_CPU_DEVICES gives
    expect(dtorch(['info'], { DTORCH_CPU_DEVICES: '4' }).stdout).toMatch(/^ {2}cpu:0-3 .* shared by the 4 CPU devices/m);
  });

  it('--version prints the package version; the bin entry runs the same program', () => {
    expect(dtorch(['--version']).stdout.trim()).toBe(hfPackage.version);
    const r = spawnSync(process.execPath, [bin, '--version'], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(hfPackage.version);
  });
});

describe('dtorch generate: errors are one line and exit code 1', () => {
  const base = ['generate', '--prompt', 'a cat', '--out', join(work, 'never.png')];

  it('an unknown model (not a folder, not in the HF cache offline)', () => {
    expectOneLineError(dtorch([...base, '--model', 'no-such-model']), /no-such-model.*not in the HF cache/);
    expectOneLineError(dtorch([...base, '--model', './no/such/folder']), /neither a folder on this machine nor a hub id/);
  });

  it('a folder that is not a pipeline (no model_index.json), or one of a class DTorch lacks', () => {
    const empty = join(work, 'not-a-pipeline');
    mkdirSync(empty, { recursive: true });
    expectOneLineError(dtorch([...base, '--model', empty]), /has no model_index\.json/);
    const other = join(work, 'other-pipeline');
    mkdirSync(other, { recursive: true });
    writeFileSync(join(other, 'model_index.json'), '{"_class_name": "KandinskyPipeline"}');
    expectOneLineError(dtorch([...base, '--model', other]), /is a KandinskyPipeline; DTorch has/);
  });

  it('a bad --size, --steps or --dtype', () => {
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--size', '64by64']), /--size: expected WIDTHxHEIGHT/);
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--size', '0x64']), /--size: expected WIDTHxHEIGHT/);
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--steps', '2.5']), /--steps.*whole number/);
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--dtype', 'int8']), /Allowed choices are float32, bfloat16, float16/);
  });

  it('--parallel degrees whose product is larger (or smaller) than the devices', () => {
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--devices', 'cpu:0,1', '--parallel', 'cfg=2,ulysses=2']), /needs 4 devices but --devices names 2/);
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--devices', 'cpu:0-3', '--parallel', 'ulysses=2']), /uses 2; add dp=2 to --parallel/);
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--parallel', 'sp=2']), /unknown mesh dim "sp"/);
  });

  it('a device that does not exist', () => {
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--devices', 'cpu:5000']), /cpu device 5000 does not exist/);
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--devices', 'tpu:0']), /--devices: expected cpu or cuda/);
  });

  it('an unknown flag, a missing --prompt, an unknown command', () => {
    expectOneLineError(dtorch([...base, '--model', 'tiny-flux', '--bogus']), /unknown option '--bogus'/);
    expectOneLineError(dtorch(['generate', '--model', 'tiny-flux']), /required option '--prompt <text>' not specified/);
    expectOneLineError(dtorch(['paint']), /unknown command 'paint'/);
  });

  it('DTORCH_LOG=debug adds the stack', () => {
    const r = dtorch([...base, '--model', './no/such/folder'], { DTORCH_LOG: 'debug' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^error: /);
    expect(r.stderr).toMatch(/\n\s+at /);
  });
});

describe('dtorch generate --model tiny-flux', () => {
  it('writes a PNG of the requested size on 2 CPU devices with ulysses=2, and a summary', () => {
    const out = join(work, 'flux', 'cat.png');
    const r = dtorch(['generate', '--model', 'tiny-flux', '--prompt', 'a cat', '--out', out, '--size', '64x32', '--steps', '2', '--devices', 'cpu:0,1', '--parallel', 'ulysses=2']);
    expect(r.status, r.stderr).toBe(0);
    expect(decodePng(out)).toEqual({ width: 64, height: 32 });
    expect(r.stdout).toContain('random weights');
    expect(r.stdout).toMatch(/^step 2\/2 /m); // plain lines: stdout is a pipe
    expect(r.stdout).toMatch(/^time: load [\d.]+s, encode [\d.]+s, denoise [\d.]+s \(2 steps/m);
    expect(r.stdout).toMatch(/^peak memory: cpu:0 [\d.]+ [MG]iB, cpu:1 [\d.]+ [MG]iB$/m);
  });

  it('--images-per-prompt 2 writes cat-0.png and cat-1.png', () => {
    const out = join(work, 'flux2', 'cat.png');
    const r = dtorch(['generate', '--model', 'tiny-flux', '--prompt', 'a cat', '--out', out, '--size', '32', '--steps', '1', '--images-per-prompt', '2']);
    expect(r.status, r.stderr).toBe(0);
    expect(decodePng(join(work, 'flux2', 'cat-0.png'))).toEqual({ width: 32, height: 32 });
    expect(decodePng(join(work, 'flux2', 'cat-1.png'))).toEqual({ width: 32, height: 32 });
    expect(existsSync(out)).toBe(false);
  });

  it('a size the model cannot take is one line', () => {
    const r = dtorch(['generate', '--model', 'tiny-flux', '--prompt', 'a cat', '--out', join(work, 'never.png'), '--size', '60x60', '--steps', '1']);
    expectOneLineError(r, /multiples of 16.*got 60x60/);
  });
});

describe('dtorch generate --model tiny-sd3', () => {
  it('writes a PNG of the requested size on 2 CPU devices with cfg=2', () => {
    const out = join(work, 'sd3', 'cat.png');
    const r = dtorch(['generate', '--model', 'tiny-sd3', '--prompt', 'a cat', '--negative-prompt', 'a dog', '--out', out, '--size', '32x64', '--steps', '2', '--devices', 'cpu:0,1', '--parallel', 'cfg=2']);
    expect(r.status, r.stderr).toBe(0);
    expect(decodePng(out)).toEqual({ width: 32, height: 64 });
  });
});

// tiny-sd3 saved as a diffusers pipeline folder
async function saveTinySd3(dir: string): Promise<void> {
  const pipe = await hf.StableDiffusion3Pipeline.tiny();
  await saveTinyPipeline(dir, 'tiny-sd3', { text_encoder: pipe.textEncoder!, text_encoder_2: pipe.textEncoder2!, text_encoder_3: pipe.textEncoder3!, transformer: pipe.transformer, vae: pipe.vae });
  pipe.dispose();
}

describe('dtorch generate --model <folder>', () => {
  it('a saved tiny-sd3 folder gives the PNG that tiny-sd3 gives; a missing component is one line', async () => {
    const dir = join(work, 'saved-sd3');
    await saveTinySd3(dir);
    const args = ['--prompt', 'a cat', '--size', '32', '--steps', '2', '--seed', '3'];
    const fromFolder = dtorch(['generate', '--model', dir, '--out', join(work, 'folder.png'), ...args]);
    expect(fromFolder.status, fromFolder.stderr).toBe(0);
    const builtIn = dtorch(['generate', '--model', 'tiny-sd3', '--out', join(work, 'builtin.png'), ...args]);
    expect(builtIn.status, builtIn.stderr).toBe(0);
    expect(readFileSync(join(work, 'folder.png')).equals(readFileSync(join(work, 'builtin.png')))).toBe(true);
    rmSync(join(dir, 'vae', 'diffusion_pytorch_model.safetensors'));
    expectOneLineError(dtorch(['generate', '--model', dir, '--out', join(work, 'never.png'), ...args]), /vae/);
  });
});
