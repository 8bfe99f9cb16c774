// Huge inputs fail at once, in one line, instead of growing until the machine gives out: the
// dtorch command, and the library calls a program makes (huge_inputs_program.mjs), each in a
// child process with a time bound and a bounded JS heap, so that a run that grows instead is
// killed and fails the test. Steps beyond the schedule, a device range past the devices there
// are, an image size or count no device can hold, a config.json whose layer count its weights
// cannot fill.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as hf from '@dtorch/hf';
import { checkBuilt, dtorch, expectOneLineError } from './dtorch_command.js';
import { saveTinyPipeline } from './save_tiny_pipeline.js';

const work = mkdtempSync(join(tmpdir(), 'dtorch-huge-'));
const program = fileURLToPath(new URL('./huge_inputs_program.mjs', import.meta.url));
// the tiny pipelines load in a second or two; a refusal comes right after
const LIMIT_MS = 45_000;
// a JS heap that grows without end stops here, not at the machine's memory
const bounded = { NODE_OPTIONS: '--max-old-space-size=1024' };
const folder = join(work, 'huge-layers');

function run(args: string[]) {
  return dtorch(work, ['generate', '--prompt', 'a cat', '--out', join(work, 'never.png'), ...args], bounded, LIMIT_MS);
}

/** The library call `name` in a child process: the error it ended with. */
function call(name: string): { code?: string; message?: string; ok?: boolean } {
  const r = spawnSync(process.execPath, [program, name, folder], { encoding: 'utf8', timeout: LIMIT_MS, killSignal: 'SIGKILL', env: { ...process.env, ...bounded } });
  expect(r.status, `${name} ended with ${r.status ?? r.signal}: ${r.stderr.slice(-2000)}`).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { code?: string; message?: string };
}

const editConfig = (path: string, values: Record<string, unknown>) => writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), ...values }));

beforeAll(async () => {
  checkBuilt();
  // tiny-sd3 saved as a pipeline folder, every model's config asking for a billion layers
  const pipe = await hf.StableDiffusion3Pipeline.tiny();
  const saved = join(work, 'saved');
  await saveTinyPipeline(saved, 'tiny-sd3', { text_encoder: pipe.textEncoder!, text_encoder_2: pipe.textEncoder2!, text_encoder_3: pipe.textEncoder3!, transformer: pipe.transformer, vae: pipe.vae });
  pipe.dispose();
  cpSync(saved, folder, { recursive: true });
  editConfig(join(folder, 'transformer', 'config.json'), { num_layers: 1e9 });
  editConfig(join(folder, 'text_encoder_3', 'config.json'), { num_layers: 1e9 });
  editConfig(join(folder, 'text_encoder', 'config.json'), { num_hidden_layers: 1e9 });
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('dtorch generate: huge inputs are one line, at once', () => {
  it('--steps 1000000000: more than the scheduler\'s timesteps', () => {
    expectOneLineError(run(['--model', 'tiny-flux', '--steps', '1000000000']), /Expected integer in \[1, 1000\] \(at most the scheduler's num_train_timesteps\) for FluxPipeline\.generate numInferenceSteps but received 1000000000/);
  });

  it('--devices cpu:0-300000000: checked against the devices before the range is expanded', () => {
    expectOneLineError(run(['--model', 'tiny-flux', '--devices', 'cpu:0-300000000']), /--devices: cpu device 300000000 does not exist: this process has cpu devices 0\.\.\d+/);
  });

  it('--size 99984x99984 and --images-per-prompt 100000: more bytes than the devices hold', () => {
    const size = run(['--model', 'tiny-flux', '--size', '99984x99984']);
    expectOneLineError(size, /this call needs at least [\d.]+ [GT]iB at once \(the VAE decoder's full-size activations: \[1, 8, 99984, 99984\] in (?:float32|bfloat16), [\d.]+ GiB\), more than (?:the host's [\d.]+ GiB of memory|the [\d.]+ GiB of cuda:0)/);
    const images = run(['--model', 'tiny-flux', '--images-per-prompt', '100000']);
    expectOneLineError(images, /this call needs at least [\d.]+ TiB at once .*\[100000, 8, 1024, 1024\].*; lower height and width, or numImagesPerPrompt$/);
  });

  it('a config.json with a billion layers: more parameters than the checkpoint holds', () => {
    expectOneLineError(run(['--model', folder, '--size', '32', '--steps', '1']), /config\.json: its sizes ask for more than \d+ parameters, but .*model\.safetensors holds \d+: the config does not belong to these weights/);
  });
});

describe('the library refuses the same calls, before anything is recorded', () => {
  it('generate({ numInferenceSteps: 1e9 }) on Flux and SD3', () => {
    for (const name of ['flux-steps', 'sd3-steps']) {
      const r = call(name);
      expect(r.code, name).toBe('INVALID_ARGUMENT');
      expect(r.message).toMatch(/integer in \[1, 1000\] .* numInferenceSteps but received 1000000000/);
    }
  });

  it('generate() of an image size or an image count no device can hold', () => {
    for (const name of ['flux-size', 'flux-images', 'sd3-images']) {
      const r = call(name);
      expect(r.code, name).toBe('INVALID_ARGUMENT');
      expect(r.message, name).toMatch(/Pipeline\.generate: this call needs at least .* more than /);
    }
  });

  it('fromPretrained of a config whose sizes ask for more than the weights hold', () => {
    for (const [name, file] of [['transformer-layers', 'transformer'], ['t5-layers', 'text_encoder_3'], ['clip-layers', 'text_encoder']] as const) {
      const r = call(name);
      expect(r.code, name).toBe('BAD_CONFIG');
      expect(r.message, name).toContain(`${join(folder, file, 'config.json')}: its sizes ask for more than`);
    }
  });
});
