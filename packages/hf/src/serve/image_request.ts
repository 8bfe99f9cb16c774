// A generation request as the wire carries it (OpenAI's images API, snake_case, plus DTorch's
// seed, steps, guidance and negative_prompt), its JSON schema for Fastify's validator, and the
// checks a schema cannot say (the size's sides against the operator's limits and the model's
// multiple). What comes out is an ImageRequest, the job's own settings, its seed always set so
// that the job can be run again to the same images.
import { randomInt } from 'node:crypto';
import type { RunnerSize } from './pipeline_runner.js';
import type { ServeLimits } from './serve_options.js';
import { RequestError } from './request_error.js';
import { loraSchema, ServedLoras, type LoraBody, type LoraWeight } from './lora_choice.js';

/** A job's settings, checked. */
export interface ImageRequest {
  /** The prompt. */
  prompt: string;
  /** The negative prompt. */
  negativePrompt?: string;
  /** Images (OpenAI's n). */
  n: number;
  /** Width in pixels. */
  width: number;
  /** Height in pixels. */
  height: number;
  /** Denoising steps (default the pipeline's). */
  steps?: number;
  /** The guidance scale (default the pipeline's). */
  guidance?: number;
  /** The seed of the first image's latents: the images are as pipe.generate's at this seed. */
  seed: number;
  /** How /v1/images/generations answers: the PNGs inline or their URLs. */
  responseFormat: 'b64_json' | 'url';
  /** Scales the loaded LoRA adapters for this job (generate's loraScale; default 1). */
  loraScale?: number;
  /** The LoRA adapters this job runs and their weights, in the order they were loaded ([]: none); unset on a server with none loaded. */
  lora?: readonly LoraWeight[];
  /** An edit's picture: a file the server wrote (never a path from the request). */
  imagePath?: string;
  /** An edit's mask (white: redrawn), as imagePath. */
  maskPath?: string;
  /** How much of the schedule an edit runs (default the pipeline's, 0.6). */
  strength?: number;
}

/** The body of POST /v1/images/generations and POST /v1/jobs. */
export interface GenerationBody {
  /** The prompt. */
  prompt: string;
  /** Images (default 1). */
  n?: number;
  /** WIDTHxHEIGHT (default the pipeline's). */
  size?: string;
  /** The images inline or their URLs (default url). */
  response_format?: 'b64_json' | 'url';
  /** The seed (default random). */
  seed?: number;
  /** Denoising steps (default the pipeline's). */
  steps?: number;
  /** The guidance scale (default the pipeline's). */
  guidance?: number;
  /** The negative prompt. */
  negative_prompt?: string;
  /** Scales the server's LoRA adapters (default 1). */
  lora_scale?: number;
  /** The loaded LoRA adapters to run: a name, or names and `{ name, scale }`; [] for none (default: the server's choice). */
  lora?: LoraBody;
  /** OpenAI's model: accepted, not used. */
  model?: string;
  /** OpenAI's user: accepted, not used. */
  user?: string;
}

// DTorch's generator takes seeds below 2^48
const MAX_SEED = 2 ** 48 - 1;
// a side must be a multiple of this: Flux's and SD3's latents are 8x smaller, in 2x2 patches
export const SIDE_MULTIPLE = 16;

/** The JSON schema of GenerationBody under `limits` (Fastify checks it before the handler runs). */
export function generationSchema(limits: ServeLimits): object {
  return {
    type: 'object',
    required: ['prompt'],
    additionalProperties: false,
    properties: {
      prompt: { type: 'string', minLength: 1, maxLength: limits.maxPromptLength },
      n: { type: 'integer', minimum: 1, maximum: limits.maxImages },
      size: { type: 'string', maxLength: 11 },
      response_format: { type: 'string', enum: ['b64_json', 'url'] },
      seed: { type: 'integer', minimum: 0, maximum: MAX_SEED },
      steps: { type: 'integer', minimum: 1, maximum: limits.maxSteps },
      guidance: { type: 'number', minimum: -1000, maximum: 1000 },
      negative_prompt: { type: 'string', maxLength: limits.maxPromptLength },
      lora_scale: { type: 'number', minimum: -10, maximum: 10 },
      lora: loraSchema,
      // accepted for OpenAI's clients, not used: the server runs the one model it loaded
      model: { type: 'string', maxLength: 256 },
      user: { type: 'string', maxLength: 256 },
    },
  };
}

/** The multipart body of POST /v1/images/edits and /v1/jobs/edits: the generation's fields, the picture, its mask, the strength. */
export function editSchema(limits: ServeLimits): object {
  const base = generationSchema(limits) as { properties: Record<string, object> };
  return {
    ...base,
    required: ['prompt', 'image'],
    // files arrive as Buffers (checked by the handler: a text field of that name is refused there)
    properties: { ...base.properties, image: {}, mask: {}, strength: { type: 'number', minimum: 0, maximum: 1 } },
  };
}

const integerFields = ['n', 'seed', 'steps'];
const numberFields = ['guidance', 'strength', 'lora_scale'];

/**
 * A form's fields are text: the numeric ones read as numbers where they are numbers (what is not
 * stays text, and the schema names it); `lora` as JSON where it is a JSON list (else a name).
 */
export function formNumbers(body: Record<string, unknown>): void {
  for (const key of integerFields) if (typeof body[key] === 'string' && /^-?\d{1,16}$/.test(body[key])) body[key] = Number(body[key]);
  for (const key of numberFields) if (typeof body[key] === 'string' && /^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(body[key])) body[key] = Number(body[key]);
  const lora = body['lora'];
  if (typeof lora === 'string' && lora.trimStart().startsWith('[')) {
    try {
      body['lora'] = JSON.parse(lora);
    } catch {
      throw new RequestError(400, 'lora', `lora: a form's lora is an adapter's name or a JSON list such as [{"name": "style", "scale": 0.8}], but ${JSON.stringify(lora.slice(0, 80))} is not JSON`);
    }
  }
}

/** `WxH` checked against the limits and the side multiple; a 400 naming `size` otherwise. */
export function parseRequestSize(size: string, limits: ServeLimits): Required<RunnerSize> {
  const match = /^(\d{1,5})x(\d{1,5})$/.exec(size);
  if (!match) throw new RequestError(400, 'size', `size must be WIDTHxHEIGHT in pixels, such as 512x512, but received ${JSON.stringify(size)}`);
  const [width, height] = [Number(match[1]), Number(match[2])];
  for (const side of [width, height]) {
    if (side < SIDE_MULTIPLE || side > limits.maxSide || side % SIDE_MULTIPLE !== 0) {
      throw new RequestError(400, 'size', `size ${size}: each side must be a multiple of ${SIDE_MULTIPLE} from ${SIDE_MULTIPLE} to ${limits.maxSide} (this server's limit)`);
    }
  }
  return { width, height };
}

/**
 * The job's settings from a body Fastify's schema already checked; `defaultSize` when it names
 * none; its LoRA choice among `loras` (none without them).
 */
export function imageRequest(body: GenerationBody, limits: ServeLimits, defaultSize: Required<RunnerSize>, loras?: ServedLoras): ImageRequest {
  const size = body.size === undefined || body.size === 'auto' ? defaultSize : parseRequestSize(body.size, limits);
  if (body.size === undefined && (defaultSize.width > limits.maxSide || defaultSize.height > limits.maxSide)) {
    throw new RequestError(400, 'size', `this model's default size ${defaultSize.width}x${defaultSize.height} is over this server's limit of ${limits.maxSide}; give a size such as ${limits.maxSide}x${limits.maxSide}`);
  }
  if (body.prompt.trim() === '') throw new RequestError(400, 'prompt', 'prompt must not be blank');
  const lora = (loras ?? ServedLoras.none).resolve(body.lora);
  return {
    prompt: body.prompt,
    ...(body.negative_prompt !== undefined && { negativePrompt: body.negative_prompt }),
    n: body.n ?? 1,
    ...size,
    ...(body.steps !== undefined && { steps: body.steps }),
    ...(body.guidance !== undefined && { guidance: body.guidance }),
    ...(body.lora_scale !== undefined && { loraScale: body.lora_scale }),
    ...(lora !== undefined && { lora }),
    seed: body.seed ?? randomInt(0, 2 ** 47),
    responseFormat: body.response_format ?? 'url',
  };
}

