#!/usr/bin/env node
// The `dtorch` command (the bin of @dtorch/hf): `dtorch generate`, `dtorch serve`, `dtorch info` and `dtorch worker`, parsed by
// commander. A failure is one line on stderr (the DTorchError's message as it is; the stack
// too under DTORCH_LOG=debug) and exit code 1; commander's own errors (an unknown flag, a bad
// number) are one line and exit code 1 as well. Nothing of DTorch is imported before fail() is
// in place: the library reads its DTORCH_* settings when it loads, and a bad one is this
// command's one-line error too. The subcommands are imported when they run, so that --help
// works without the native addon.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { GenerateFlags } from './generate.js';
import { parseLora } from './lora_spec.js';
import { parseOffload } from './offload_spec.js';
import type { ServeFlags } from './serve.js';
import type { WorkerFlags } from './worker.js';

// DTorch's generator takes seeds below 2^48 (they travel to the engine as doubles; torch's
// manual_seed takes up to 2^64 - 1)
const MAX_SEED = 2 ** 48 - 1;
// float32's largest finite value: guidance is float32 math or narrower
const FLOAT32_MAX = 3.4028234663852886e38;

function integer(what: string, min: number, max = Number.MAX_SAFE_INTEGER, note = '') {
  return (text: string): number => {
    const value = Number(text);
    if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      const range = max < Number.MAX_SAFE_INTEGER ? ` from ${min} to ${max}` : min > 0 ? ` of at least ${min}` : '';
      throw new InvalidArgumentError(`Expected a whole number${range} for ${what}${note}.`);
    }
    return value;
  };
}

function scale(what: string) {
  return (text: string): number => {
    const value = Number(text);
    if (text.trim() === '' || !Number.isFinite(value) || Math.abs(value) > FLOAT32_MAX) {
      throw new InvalidArgumentError(`Expected a number of magnitude at most ${FLOAT32_MAX} (float32's range) for ${what}.`);
    }
    return value;
  };
}

// --strength: a number in [0, 1]
function strength(text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !(value >= 0 && value <= 1)) throw new InvalidArgumentError('Expected a number from 0 to 1 for --strength.');
  return value;
}

// --cache kind[:setting]: its spelling here; the kind and the setting are checked once the
// command runs (parseCacheConfig: importing it here would load DTorch before fail() is set up)
function cacheFlag(text: string): string {
  if (!/^[a-z-]+(:[^:]+)?$/.test(text)) throw new InvalidArgumentError(`Expected first-block[:threshold] or taylorseer[:interval] for --cache, but received ${JSON.stringify(text)}.`);
  return text;
}

/** Prints `error` as one line (and its stack under DTORCH_LOG=debug); exits 1. */
function fail(error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`error: ${message}\n`);
  if (process.env['DTORCH_LOG'] === 'debug' && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  process.exit(1);
}

const meshHelp = `
The mesh: --devices names the devices (cuda:0,1 | cuda:0-3 | cpu:0,1 | cpu: the first ones;
default the first GPUs, else the first CPU devices, as many as --parallel needs), --parallel the
mesh dims, outermost first, and their degrees (cfg=2,ulysses=2; dims dp, cfg, ulysses, ring, tp).
The degrees' product must equal the number of devices: devices left over are an error (add dp=N
to split the images over them), not a dim added silently.

Several images (--images-per-prompt N) are written as cat-0.png, cat-1.png, ... beside --out.
An existing file is replaced (as diffusers' image.save replaces it); --no-overwrite refuses
instead, before anything loads. --out is checked before loading too: a folder, or a place that
cannot be written, is an error at once.

Examples:
  dtorch generate --model shapes-flux --prompt "a red circle at the top left on a blue background" --out shapes.png
  dtorch generate --model tiny-flux --prompt "a cat" --out cat.png --size 64x64 --steps 4
  dtorch generate --model tiny-flux --prompt "a cat" --out cat.png --devices cpu:0,1 --parallel ulysses=2
  dtorch generate --model black-forest-labs/FLUX.1-dev --prompt "a cat" --lora ./style.safetensors:0.8 --lora org/detail-lora --fuse-lora
  dtorch generate --model black-forest-labs/FLUX.1-dev --prompt "a cat" --cache first-block:0.12
  dtorch generate --model black-forest-labs/FLUX.1-dev --prompt "a cat" --offload group:2
  dtorch generate --model black-forest-labs/FLUX.1-dev --prompt "the same cat at night" --image cat.png --strength 0.7 --out night.png
  dtorch generate --model black-forest-labs/FLUX.1-dev --prompt "a red hat" --image cat.png --mask hat-mask.png --strength 0.9 --out hat.png
  dtorch generate --model black-forest-labs/FLUX.1-dev --prompt "a cat" --out cat.png --devices cuda:0 --dtype bfloat16`;

const serveClusterHelp = `
Behind a cluster (docs/serve.md): --cluster-workers N makes the server a cluster's main node; it
waits for N workers (\`dtorch worker --main HOST:PORT --token-file FILE\` on each host), and
--devices names devices by their cluster-wide index (this process's first, then each worker's in
join order). A lost worker fails the running job; the pipeline is built again on the devices left
if they are enough for --parallel, else new jobs get a 503 until workers enough join again.

Example:
  dtorch serve --model tiny-flux --cluster-workers 1 --cluster-listen 0.0.0.0:7070 --cluster-token-file ~/.dtorch-token --token-file ~/.serve-token --host 0.0.0.0 --devices cpu:0,1 --parallel ulysses=2`;

/** The `dtorch` command and its subcommands, generate, serve, info and worker; `version`: @dtorch/hf's. */
export function program(version: string): Command {
  const cli = new Command('dtorch')
    .description('DTorch: diffusion pipelines on any mesh of devices, from the command line')
    .version(version, '-v, --version')
    .showSuggestionAfterError(false);

  cli
    .command('generate')
    .description('generate images from a prompt and write them as PNG')
    .requiredOption('--model <model>', 'a hub id, a diffusers pipeline folder, shapes-flux (built in, trained on drawn shapes), or tiny-flux / tiny-sd3 (built in, random weights)')
    .requiredOption('--prompt <text>', 'the prompt')
    .option('--out <file.png>', 'the PNG to write; an existing file is replaced unless --no-overwrite', 'image.png')
    .option('--no-overwrite', 'refuse to replace an existing --out file (for scripts that must not lose files)')
    .option('--negative-prompt <text>', 'the negative prompt (SD3: classifier-free guidance; Flux: with --true-cfg-scale > 1)')
    .option('--steps <n>', 'denoising steps (default the pipeline\'s: 28; shapes-flux 20; at most the scheduler\'s num_train_timesteps, 1000)', integer('--steps', 1))
    .option('--size <WxH>', 'WIDTHxHEIGHT in pixels, or one number for a square (default the pipeline\'s: 1024x1024 for FLUX.1, SD3 and tiny-flux, 128x128 for shapes-flux, 32x32 for tiny-sd3)')
    .option('--seed <n>', `the seed of the initial latents, 0 to ${MAX_SEED} (as torch.Generator("cpu").manual_seed)`, integer('--seed', 0, MAX_SEED, ` (DTorch's generator takes seeds below 2^48; torch's go up to 2^64 - 1)`), 0)
    .option('--guidance <scale>', 'guidance scale (Flux: the embedded guidance, default 3.5; SD3: CFG, default 7)', scale('--guidance'))
    .option('--true-cfg-scale <scale>', 'Flux: true classifier-free guidance with --negative-prompt when > 1', scale('--true-cfg-scale'))
    .option('--devices <devices>', 'cuda:0,1 | cpu:0,1 | cpu (see below)')
    .option('--parallel <dims>', 'mesh dims and degrees, e.g. cfg=2,ulysses=2 (see below)')
    .addOption(new Option('--dtype <dtype>', 'the parameters\' dtype (default bfloat16 on CUDA devices, float32 on CPU devices)').choices(['float32', 'bfloat16', 'float16']))
    .addOption(new Option('--quantize <kind>', "fp8: the transformer's block linears with FP8 weights and per-token FP8 activations (half the weight memory; faster GEMMs on Hopper GPUs)").choices(['fp8']))
    .option('--images-per-prompt <n>', 'images per prompt', integer('--images-per-prompt', 1))
    .option('--revision <rev>', 'the hub revision (branch, tag or commit)')
    .option('--local-files-only', 'use the HF cache only, no download')
    .option('--lora <[name=]path-or-id[:scale]>', 'a LoRA to run with, at a weight (default 1): a .safetensors file, a folder or hub id holding one, or org/name/file.safetensors, as adapter name (default the file\'s name); repeat for several', parseLora)
    .option('--fuse-lora', 'fuse the LoRAs into the weights before generating (no per-step cost)')
    .option('--cache <kind[:setting]>', "reuse the transformer's work between steps, as diffusers' caches: first-block[:threshold] (First-Block Cache; default 0.05, higher skips more) or taylorseer[:interval] (TaylorSeer; default 5)", cacheFlag)
    .option('--offload <model|group[:N]>', "fit a memory budget, as diffusers' CPU offloading: model keeps each model in host memory and on the devices only while it runs (enable_model_cpu_offload); group:N keeps the transformer's and text encoders' blocks there, N to a group (default 1), each group on the devices only while it runs (apply_group_offloading)", parseOffload)
    .option('--image <picture>', 'start from this picture (PNG, JPEG, WebP): the model\'s image-to-image variant runs, at the picture\'s size unless --size')
    .option('--mask <picture>', 'with --image: white where the picture is redrawn, black where it is kept (the model\'s inpainting variant runs)')
    .option('--strength <s>', 'with --image: how much of the schedule runs, 0 to 1 (default 0.6): 1 redraws everything, small values keep the picture', strength)
    .addHelpText('after', meshHelp)
    .action(async (flags: GenerateFlags) => {
      const { runGenerate } = await import('./generate.js');
      await runGenerate(flags);
    });

  cli
    .command('serve')
    .description('serve a pipeline over HTTP: OpenAI\'s images API, jobs with progress events, a web page, /metrics')
    .requiredOption('--model <model>', 'a hub id, a diffusers pipeline folder, shapes-flux, or tiny-flux / tiny-sd3 (as dtorch generate)')
    .option('--devices <devices>', 'cuda:0,1 | cpu:0,1 | cpu (as dtorch generate)')
    .option('--parallel <dims>', 'mesh dims and degrees, e.g. dp=2 (as dtorch generate)')
    .addOption(new Option('--dtype <dtype>', 'the parameters\' dtype (default bfloat16 on CUDA devices, float32 on CPU devices)').choices(['float32', 'bfloat16', 'float16']))
    .option('--host <address>', 'the address to listen on; one that is not loopback needs --token-file', '127.0.0.1')
    .option('--port <n>', 'the port (0: any free one)', integer('--port', 0, 65535), 8080)
    .option('--token-file <file>', 'a file whose first line is the bearer token every /v1 request must carry')
    .option('--output-dir <folder>', 'where results and the job journal are written', 'dtorch-serve')
    .option('--max-queue <n>', 'jobs waiting at most; one more is a 429 with Retry-After', integer('--max-queue', 1, 100_000), 32)
    .option('--max-batch <n>', 'queued requests of the same size and steps run as one batch of at most n images', integer('--max-batch', 1, 64), 1)
    .option('--max-size <pixels>', 'the largest width or height a request may ask', integer('--max-size', 16, 16384), 1024)
    .option('--max-steps <n>', 'the most denoising steps a request may ask', integer('--max-steps', 1, 1000), 50)
    .option('--max-images <n>', 'the most images per request (n)', integer('--max-images', 1, 64), 4)
    .option('--max-prompt-length <n>', 'the longest prompt in characters', integer('--max-prompt-length', 1, 1_000_000), 2000)
    .option('--lora <[name=]path-or-id[:scale]>', 'a LoRA adapter to load, as dtorch generate, named (default the file\'s name) for requests to choose by their lora; those given run by default; repeat for several', parseLora)
    .option('--fuse-lora', 'fuse the LoRAs into the weights (no per-step cost; requests cannot then choose others, and lora_scale has no effect)')
    .option('--keep-jobs <n>', 'finished jobs kept with their images; older ones are forgotten and their files deleted', integer('--keep-jobs', 1, 10_000_000), 1000)
    .option('--cancel-on-shutdown', 'on SIGTERM, cancel the running job between steps instead of finishing it')
    .option('--shutdown-timeout <seconds>', 'on SIGTERM, wait this long for the running job before cancelling it', integer('--shutdown-timeout', 0, 86_400), 120)
    .addOption(new Option('--log-level <level>', 'the JSON log\'s level').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'))
    .option('--revision <rev>', 'the hub revision (branch, tag or commit)')
    .option('--local-files-only', 'use the HF cache only, no download')
    .option('--cluster-workers <n>', 'be the main node of a cluster: wait for n `dtorch worker`s to join before loading; --devices then names the cluster\'s devices (docs/cluster.md)', integer('--cluster-workers', 1, 65_536))
    .option('--cluster-listen <host:port>', 'where workers join (default 127.0.0.1:0: loopback, a free port, printed); an address beyond this host needs --cluster-token-file')
    .option('--cluster-token-file <file>', 'a file whose first line is the token workers present (default: DTORCH_CLUSTER_TOKEN)')
    .option('--cluster-join-timeout <seconds>', 'how long to wait for the workers (default 60)', integer('--cluster-join-timeout', 1, 86_400))
    .option('--cluster-main-devices <devices>', 'this process\'s own devices in the cluster, numbered first: cpu:0-1 | cuda:0-7 (default every GPU and cpu:0)')
    .addHelpText('after', serveClusterHelp)
    .action(async (flags: ServeFlags) => {
      const { runServe } = await import('./serve.js');
      await runServe(flags);
    });

  cli
    .command('info')
    .description('DTorch, LibTorch, CUDA and NCCL versions, and the devices with their memory')
    .action(async () => {
      const { runInfo } = await import('./info.js');
      runInfo();
    });

  cli
    .command('worker')
    .description('join a cluster: serve this host\'s devices to the main program at --main until it ends the cluster')
    .requiredOption('--main <host:port>', 'the main node\'s address (what dt.cluster.start resolved to)')
    .option('--token-file <file>', 'a file whose first line is the cluster\'s token (default: DTORCH_CLUSTER_TOKEN)')
    .option('--devices <devices>', 'the devices to offer: cpu:0-3 | cuda:0-7 (default every GPU, else cpu:0)')
    .action(async (flags: WorkerFlags) => {
      const { runWorkerCommand } = await import('./worker.js');
      await runWorkerCommand(flags);
    });

  return cli;
}

async function main(): Promise<void> {
  const { versions } = await import('./info.js');
  await program(versions().hf).parseAsync(process.argv);
}

main().catch(fail);
