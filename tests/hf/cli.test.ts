// The `dtorch` command run as a child process (node packages/hf/dist/cli/main.js ...), as a user
// runs it: `info` prints the versions, `generate --model tiny-flux` writes PNGs that decode to
// the requested size, and each error is one line on stderr with a non-zero exit code.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { checkBuilt, dtorch as runDtorch, expectOneLineError, type Run } from './dtorch_command.js';
import { saveTinyPipeline } from './save_tiny_pipeline.js';

const bin = fileURLToPath(new URL('../../packages/hf/bin/dtorch.js', import.meta.url));
const hfPackage = JSON.parse(readFileSync(fileURLToPath(new URL('../../packages/hf/package.json', import.meta.url)), 'utf8')) as { version: string };
const work = mkdtempSync(join(tmpdir(), 'dtorch-cli-'));

function dtorch(args: string[], env: Record<string, string> = {}): Run {
  return runDtorch(work, args, env);
}

function decodePng(path: string): { width: number; height: number } {
  const png = PNG.sync.read(readFileSync(path));
  return { width: png.width, height: png.height };
}

beforeAll(checkBuilt);
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

describe('dtorch generate --lora', () => {
  const loras = fileURLToPath(new URL('../fixtures/hf/lora/', import.meta.url));
  const style = join(loras, 'flux-style.safetensors');
  const detail = join(loras, 'flux-detail.safetensors');
  const args = ['--model', 'tiny-flux', '--prompt', 'a cat', '--size', '32', '--steps', '2', '--seed', '1'];
  const pixels = (path: string) => PNG.sync.read(readFileSync(path)).data;

  it("gives the PNG of the library's loadLoraWeights and setAdapters; --fuse-lora gives the same picture", async () => {
    const r = dtorch(['generate', ...args, '--lora', `${style}:0.5`, '--lora', detail, '--out', join(work, 'lora.png')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('LoRA: flux-style x0.5, flux-detail x1');
    const pipe = await hf.FluxPipeline.tiny();
    try {
      await pipe.loadLoraWeights(style, { adapterName: 'a' });
      await pipe.loadLoraWeights(detail, { adapterName: 'b' });
      pipe.setAdapters(['a', 'b'], [0.5, 1]);
      const { images } = await pipe.generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 2, seed: 1 });
      expect(readFileSync(join(work, 'lora.png')).equals(images[0]!)).toBe(true);
    } finally {
      pipe.dispose();
    }
    const plain = dtorch(['generate', ...args, '--out', join(work, 'plain.png')]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(readFileSync(join(work, 'plain.png')).equals(readFileSync(join(work, 'lora.png'))), 'the LoRA changes the picture').toBe(false);
    const fused = dtorch(['generate', ...args, '--lora', `${style}:0.5`, '--lora', detail, '--fuse-lora', '--out', join(work, 'fused.png')]);
    expect(fused.status, fused.stderr).toBe(0);
    expect(fused.stdout).toMatch(/\(fused into \d+ linear layers\)/);
    const [a, b] = [pixels(join(work, 'lora.png')), pixels(join(work, 'fused.png'))];
    expect(Math.max(...a.map((v, i) => Math.abs(v - b[i]!))), 'fused and unfused differ by rounding at most').toBeLessThanOrEqual(2);
  });

  it("--quantize fp8 gives the PNG of the library's { quantize: 'fp8' }, not the float one; another kind is one line", async () => {
    const r = dtorch(['generate', ...args, '--quantize', 'fp8', '--out', join(work, 'fp8.png')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("the transformer's linears in FP8");
    const pipe = await hf.FluxPipeline.tiny({ quantize: 'fp8' });
    try {
      const { images } = await pipe.generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 2, seed: 1 });
      expect(readFileSync(join(work, 'fp8.png')).equals(images[0]!)).toBe(true);
    } finally {
      pipe.dispose();
    }
    const plain = dtorch(['generate', ...args, '--out', join(work, 'plain-fp8.png')]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(readFileSync(join(work, 'plain-fp8.png')).equals(readFileSync(join(work, 'fp8.png'))), 'FP8 changes the picture').toBe(false);
    expectOneLineError(dtorch(['generate', ...args, '--quantize', 'int4', '--out', join(work, 'x.png')]), /--quantize.*int4.*fp8/);
  });

  it('a missing file, a bad scale, --fuse-lora alone and a LoRA for another model are one line', () => {
    expectOneLineError(dtorch(['generate', ...args, '--lora', join(work, 'none.safetensors'), '--out', join(work, 'x.png')]), /there is no file .*none\.safetensors/);
    expectOneLineError(dtorch(['generate', ...args, '--lora', `${style}:much`, '--out', join(work, 'x.png')]), /--lora PATH-OR-ID\[:SCALE\] with SCALE a number/);
    expectOneLineError(dtorch(['generate', ...args, '--fuse-lora', '--out', join(work, 'x.png')]), /--fuse-lora: there is no --lora/);
    expectOneLineError(dtorch(['generate', ...args, '--lora', join(loras, 'sd3-style.safetensors'), '--out', join(work, 'x.png')]), /strict: false/);
  });
});

describe('dtorch generate --cache', () => {
  const args = ['--model', 'tiny-flux', '--prompt', 'a cat', '--size', '32', '--steps', '4', '--seed', '1'];

  it("gives the PNG of the library's enableCache and says how many calls ran the cached work; a bad flag is one line", async () => {
    // a threshold no change reaches: only the first call runs every block
    const r = dtorch(['generate', ...args, '--cache', 'first-block:100', '--out', join(work, 'cached.png')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('step cache: first-block, threshold 100');
    expect(r.stdout).toContain('step cache: the cached work ran in 1 of 4 transformer calls');
    const pipe = await hf.FluxPipeline.tiny();
    try {
      pipe.transformer.enableCache({ kind: 'first-block', threshold: 100 });
      const { images } = await pipe.generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 4, seed: 1 });
      expect(readFileSync(join(work, 'cached.png')).equals(images[0]!)).toBe(true);
    } finally {
      pipe.dispose();
    }
    const plain = dtorch(['generate', ...args, '--out', join(work, 'uncached.png')]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).not.toContain('step cache');
    expect(readFileSync(join(work, 'uncached.png')).equals(readFileSync(join(work, 'cached.png'))), 'skipping steps changes the picture').toBe(false);
    expectOneLineError(dtorch(['generate', ...args, '--cache', 'taylor:0.1', '--out', join(work, 'x.png')]), /one of 'first-block', 'taylorseer', 'mag' for --cache config\.kind/);
    expectOneLineError(dtorch(['generate', ...args, '--cache', 'first-block:0.1:2', '--out', join(work, 'x.png')]), /Expected first-block\[:threshold\] or taylorseer\[:interval\] for --cache/);
    expectOneLineError(dtorch(['generate', ...args, '--cache', 'first-block:fast', '--out', join(work, 'x.png')]), /first-block\[:threshold\]/);
  });
});

describe('dtorch generate --offload', () => {
  const args = ['--model', 'tiny-flux', '--prompt', 'a cat', '--size', '32', '--steps', '2', '--seed', '3'];

  it('model, group and group:N give the PNG of the run without it and say what runs; on 2 devices too; a bad flag is one line', async () => {
    const plain = dtorch(['generate', ...args, '--out', join(work, 'resident.png')]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).not.toContain('offload');
    const resident = readFileSync(join(work, 'resident.png'));
    const runs = [
      [['--offload', 'model'], 'offload: each model in host memory, on the devices only while it runs'],
      [['--offload', 'group'], "offload: the transformer's and text encoders' blocks in host memory, 1 to a group"],
      [['--offload', 'group:2', '--devices', 'cpu:0,1', '--parallel', 'tp=2'], "blocks in host memory, 2 to a group"],
    ] as const;
    for (const [flags, line] of runs) {
      const out = join(work, `offload-${flags[1]}.png`);
      const r = dtorch(['generate', ...args, ...flags, '--out', out]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain(line);
      expect(readFileSync(out).equals(resident), flags.join(' ')).toBe(true);
    }
    expectOneLineError(dtorch(['generate', ...args, '--offload', 'sequential', '--out', join(work, 'x.png')]), /Expected model, group or group:N \(N blocks to a group, a positive integer\) for --offload, but received "sequential"/);
    expectOneLineError(dtorch(['generate', ...args, '--offload', 'group:0', '--out', join(work, 'x.png')]), /for --offload, but received "group:0"/);
  });
});

describe('dtorch generate --image', () => {
  const pictures = fileURLToPath(new URL('../fixtures/hf/pipelines/', import.meta.url));
  const wide = join(pictures, 'img2img-wide.png'); // 64x32 (width x height)
  const args = ['--prompt', 'a cat', '--steps', '4', '--seed', '2'];

  it("runs the model's image-to-image variant at the picture's size, giving the library's PNG; SD3 too", async () => {
    const r = dtorch(['generate', '--model', 'tiny-flux', ...args, '--image', wide, '--strength', '0.7', '--out', join(work, 'edit.png')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('image to image (FluxImg2ImgPipeline)');
    expect(r.stdout).toMatch(/image encode \d+\.\d+s/);
    expect(decodePng(join(work, 'edit.png'))).toEqual({ width: 64, height: 32 });
    const pipe = await hf.FluxImg2ImgPipeline.tiny();
    try {
      const { images } = await pipe.generate({ prompt: 'a cat', image: wide, strength: 0.7, height: 32, width: 64, numInferenceSteps: 4, seed: 2 });
      expect(readFileSync(join(work, 'edit.png')).equals(images[0]!)).toBe(true);
    } finally {
      pipe.dispose();
    }
    const sd3 = dtorch(['generate', '--model', 'tiny-sd3', ...args, '--image', wide, '--size', '32', '--out', join(work, 'edit-sd3.png')]);
    expect(sd3.status, sd3.stderr).toBe(0);
    expect(sd3.stdout).toContain('image to image (StableDiffusion3Img2ImgPipeline)');
    expect(decodePng(join(work, 'edit-sd3.png'))).toEqual({ width: 32, height: 32 });
  });

  it("with --mask runs the inpainting variant, giving the library's PNG", async () => {
    const [picture, mask] = [join(pictures, 'img2img-a.png'), join(pictures, 'inpaint-mask-a.png')];
    const r = dtorch(['generate', '--model', 'tiny-flux', ...args, '--image', picture, '--mask', mask, '--strength', '0.9', '--out', join(work, 'inpaint.png')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('(FluxInpaintPipeline)');
    const pipe = await hf.FluxInpaintPipeline.tiny();
    try {
      const { images } = await pipe.generate({ prompt: 'a cat', image: picture, maskImage: mask, strength: 0.9, height: 64, width: 64, numInferenceSteps: 4, seed: 2 });
      expect(readFileSync(join(work, 'inpaint.png')).equals(images[0]!)).toBe(true);
    } finally {
      pipe.dispose();
    }
    expectOneLineError(dtorch(['generate', '--model', 'tiny-flux', ...args, '--mask', mask, '--out', join(work, 'x.png')]), /--mask: there is no --image/);
  });

  it("a FLUX.1-Kontext folder edits the picture (FluxKontextPipeline), giving the library's PNG", async () => {
    const dir = join(work, 'saved-kontext');
    const t2i = await hf.FluxPipeline.tiny();
    await saveTinyPipeline(dir, 'tiny-flux', { text_encoder: t2i.textEncoder!, text_encoder_2: t2i.textEncoder2!, transformer: t2i.transformer, vae: t2i.vae });
    t2i.dispose();
    const index = JSON.parse(readFileSync(join(dir, 'model_index.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(dir, 'model_index.json'), JSON.stringify({ ...index, _class_name: 'FluxKontextPipeline' }));
    const r = dtorch(['generate', '--model', dir, ...args, '--image', wide, '--out', join(work, 'kontext.png')]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('editing (FluxKontextPipeline)');
    const pipe = await hf.FluxKontextPipeline.fromPretrained(dir);
    try {
      const { images } = await pipe.generate({ prompt: 'a cat', image: wide, height: 32, width: 64, maxArea: 64 * 32, numInferenceSteps: 4, seed: 2 });
      expect(decodePng(join(work, 'kontext.png'))).toEqual({ width: 64, height: 32 });
      expect(readFileSync(join(work, 'kontext.png')).equals(images[0]!)).toBe(true);
    } finally {
      pipe.dispose();
    }
    expectOneLineError(dtorch(['generate', '--model', dir, ...args, '--image', wide, '--strength', '0.5', '--out', join(work, 'x.png')]), /a reference, not a start/);
  });

  it('a picture that is not one, a missing picture, a bad strength and --strength alone are one line', () => {
    const text = join(work, 'not-a-picture.png');
    writeFileSync(text, 'hello');
    expectOneLineError(dtorch(['generate', '--model', 'tiny-flux', ...args, '--image', text, '--out', join(work, 'x.png')]), /not-a-picture\.png/);
    expectOneLineError(dtorch(['generate', '--model', 'tiny-flux', ...args, '--image', join(work, 'none.png'), '--out', join(work, 'x.png')]), /none\.png/);
    expectOneLineError(dtorch(['generate', '--model', 'tiny-flux', ...args, '--image', wide, '--strength', '2', '--out', join(work, 'x.png')]), /from 0 to 1 for --strength/);
    expectOneLineError(dtorch(['generate', '--model', 'tiny-flux', ...args, '--strength', '0.5', '--out', join(work, 'x.png')]), /--strength: there is no --image/);
  });
});

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

describe('dtorch generate: every bad input is one line, and what can be checked before loading is', () => {
  const base = ['generate', '--model', 'tiny-sd3', '--prompt', 'a cat', '--size', '32', '--steps', '1'];
  const saved = join(work, 'base-sd3');
  // a copy of the saved tiny-sd3 folder, changed by `change`
  const variant = (name: string, change: (dir: string) => void): string => {
    const dir = join(work, name);
    cpSync(saved, dir, { recursive: true });
    change(dir);
    return dir;
  };
  const editConfig = (path: string, values: Record<string, unknown>) => writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), ...values }));
  beforeAll(() => saveTinySd3(saved));

  it('a bad DTORCH_* setting, even for --help', () => {
    expectOneLineError(dtorch(['--help'], { DTORCH_READ_TIMEOUT_MS: '0' }), /environment variable DTORCH_READ_TIMEOUT_MS but received "0"/);
    expectOneLineError(dtorch(['info'], { DTORCH_SEGMENT_NODES: 'many' }), /environment variable DTORCH_SEGMENT_NODES/);
  });

  it('--size in the error is WIDTHxHEIGHT as the flag is: the suggestion pasted back runs', () => {
    const flux = ['generate', '--model', 'tiny-flux', '--prompt', 'a cat', '--steps', '1'];
    expectOneLineError(dtorch([...flux, '--size', '33x17', '--out', join(work, 'never.png')]), /got 33x17 \(width x height\); e\.g\. 32x16$/);
    const out = join(work, 'pasted.png');
    const r = dtorch([...flux, '--size', '32x16', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    expect(decodePng(out)).toEqual({ width: 32, height: 16 });
  });

  it('an --out that is a folder or cannot be written, before the pipeline loads', () => {
    mkdirSync(join(work, 'a-folder.png'));
    const folder = dtorch([...base, '--out', join(work, 'a-folder.png')]);
    expectOneLineError(folder, /--out: .*a-folder\.png is a folder; give a file name/);
    expect(folder.stdout).not.toMatch(/loading/);
    // sysfs takes no new file from anyone, root included
    const readOnly = dtorch([...base, '--out', '/sys/dtorch-cli-test/cat.png']);
    expectOneLineError(readOnly, /--out: cannot write \/sys\/dtorch-cli-test\/cat\.png \((EACCES|EPERM|EROFS): /);
    expect(readOnly.stdout).not.toMatch(/loading/);
  });

  it('--no-overwrite refuses an existing file; without it the file is replaced, as --help says', () => {
    const out = join(work, 'kept.png');
    writeFileSync(out, 'not a png');
    const refused = dtorch([...base, '--out', out, '--no-overwrite']);
    expectOneLineError(refused, /kept\.png exists and --no-overwrite is given; remove it or choose another name/);
    expect(refused.stdout).not.toMatch(/loading/);
    expect(readFileSync(out, 'utf8')).toBe('not a png');
    const replaced = dtorch([...base, '--out', out]);
    expect(replaced.status, replaced.stderr).toBe(0);
    expect(decodePng(out)).toEqual({ width: 32, height: 32 });
  });

  it('--guidance and --seed out of range name the flag and the range', () => {
    const guidance = dtorch([...base, '--guidance', '1e308', '--out', join(work, 'never.png')]);
    expectOneLineError(guidance, /argument '1e308' is invalid.*float32's range\) for --guidance/);
    expect(guidance.stderr).not.toMatch(/full value/);
    expectOneLineError(dtorch([...base, '--seed', '18446744073709551615', '--out', join(work, 'never.png')]), /from 0 to 281474976710655 for --seed \(DTorch's generator takes seeds below 2\^48/);
    const largest = dtorch([...base, '--seed', '281474976710655', '--out', join(work, 'largest-seed.png')]);
    expect(largest.status, largest.stderr).toBe(0);
  });

  it('a pipeline folder without a component folder names that folder', () => {
    const dir = variant('no-vae', (d) => rmSync(join(d, 'vae'), { recursive: true }));
    const r = dtorch([...base, '--model', dir, '--out', join(work, 'never.png')]);
    expectOneLineError(r, /has no vae\/config\.json: the pipeline's vae\/ folder is missing/);
    expect(r.stderr).not.toMatch(/subfolder/);
  });

  it('an empty tokenizer vocabulary names its file', () => {
    const dir = variant('empty-vocab', (d) => writeFileSync(join(d, 'tokenizer', 'vocab.json'), '{}'));
    expectOneLineError(dtorch([...base, '--model', dir, '--out', join(work, 'never.png')]), /empty-vocab\/tokenizer\/vocab\.json: the vocabulary is empty/);
  });

  it('a negative relative_attention_num_buckets names the config key', () => {
    const dir = variant('negative-buckets', (d) => editConfig(join(d, 'text_encoder_3', 'config.json'), { relative_attention_num_buckets: -4 }));
    expectOneLineError(dtorch([...base, '--model', dir, '--out', join(work, 'never.png')]), /text_encoder_3\/config\.json: "relative_attention_num_buckets" must be a positive integer; got -4/);
  });

  it('a config.json that is a symbolic link loop says so', () => {
    const dir = variant('link-loop', (d) => {
      rmSync(join(d, 'transformer', 'config.json'));
      symlinkSync('config.json', join(d, 'transformer', 'config.json'));
    });
    expectOneLineError(dtorch([...base, '--model', dir, '--out', join(work, 'never.png')]), /transformer\/config\.json is a symbolic link that loops \(ELOOP\)/);
  });

  it('garbage in merges.txt is quoted escaped and short, never raw bytes on the terminal', () => {
    // an escape sequence (ESC [ 2 J clears a terminal), C1's CSI in UTF-8 (a terminal reads it as ESC [), a bell,
    // then 2,000 bytes of every value
    const garbage = Buffer.concat([Buffer.from('\x1b[2J\u009b31m\x07 ', 'utf8'), Buffer.from(Array.from({ length: 2000 }, (_, i) => (i * 37) % 256))]);
    const dir = variant('garbage-merges', (d) => writeFileSync(join(d, 'tokenizer', 'merges.txt'), garbage));
    const r = dtorch([...base, '--model', dir, '--out', join(work, 'never.png')]);
    expectOneLineError(r, /merges\.txt line 1: expected a merge "a b" but found ".*"\.\.\. \(\d+ characters\)$/);
    expect(r.stderr.trimEnd()).not.toMatch(/\p{Cc}/u); // no C0 or C1 control character, ESC included
    expect(r.stderr.length).toBeLessThan(400);
  });
});

describe('dtorch generate --seed', () => {
  it('different seeds give different images, and --seed N the image of generate({ seed: N })', async () => {
    for (const [model, pipeline] of [['tiny-sd3', hf.StableDiffusion3Pipeline], ['tiny-flux', hf.FluxPipeline]] as const) {
      // the CPU device and float32, as the library call below (on a GPU machine the CLI would pick cuda and bfloat16)
      const args = ['generate', '--model', model, '--prompt', 'a cat', '--size', '32', '--steps', '1', '--devices', 'cpu:0', '--dtype', 'float32'];
      const images = [5, 6].map((seed) => {
        const out = join(work, `${model}-seed-${seed}.png`);
        const r = dtorch([...args, '--seed', String(seed), '--out', out]);
        expect(r.status, r.stderr).toBe(0);
        return readFileSync(out);
      });
      expect(images[0]!.equals(images[1]!), `${model}: --seed 5 and --seed 6 give one image`).toBe(false);
      const pipe: hf.DiffusionPipeline = await pipeline.tiny();
      try {
        const { images: library } = await pipe.generate({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 1, seed: 5 });
        expect((library as Buffer[])[0]!.equals(images[0]!), `${model}: --seed 5 differs from generate({ seed: 5 })`).toBe(true);
      } finally {
        pipe.dispose();
      }
    }
  });
});

describe('dtorch generate: the defaults --help names', () => {
  it('dtype by device kind, each built-in model\'s size, --out replacing a file', async () => {
    const help = dtorch(['generate', '--help']).stdout.replace(/\s+/g, ' ');
    expect(help).toContain("the parameters' dtype (default bfloat16 on CUDA devices, float32 on CPU devices)");
    expect(help).toContain("default the pipeline's: 1024x1024 for FLUX.1, SD3 and tiny-flux, 128x128 for shapes-flux, 32x32 for tiny-sd3");
    expect(help).toContain('an existing file is replaced unless --no-overwrite');
    // what it says is what runs
    const flux = await hf.FluxPipeline.tiny();
    expect(flux.defaultSampleSize * flux.vaeScaleFactor).toBe(1024);
    flux.dispose();
    const out = join(work, 'default-size.png');
    const r = dtorch(['generate', '--model', 'tiny-sd3', '--prompt', 'a cat', '--steps', '1', '--out', out, '--devices', 'cpu:0']);
    expect(r.status, r.stderr).toBe(0);
    expect(decodePng(out)).toEqual({ width: 32, height: 32 });
    expect(r.stdout).toMatch(/^loading tiny-sd3 on cpu:0 in float32$/m);
    const shapes = join(work, 'shapes-size.png');
    const s = dtorch(['generate', '--model', 'shapes-flux', '--prompt', 'a red circle on a blue background', '--steps', '1', '--out', shapes, '--devices', 'cpu:0']);
    expect(s.status, s.stderr).toBe(0);
    expect(decodePng(shapes)).toEqual({ width: 128, height: 128 });
  });

  it.skipIf(!dt.cuda.isAvailable())('runs in bfloat16 on a CUDA device without --dtype', () => {
    const r = dtorch(['generate', '--model', 'tiny-sd3', '--prompt', 'a cat', '--steps', '1', '--out', join(work, 'cuda.png'), '--devices', 'cuda:0']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^loading tiny-sd3 on cuda:0 in bfloat16$/m);
  });
});
