// Which LoRA adapters a job runs with. The operator loads named adapters when the server starts
// (`--lora NAME=PATH[:SCALE]`, or loadLoraWeights on the pipeline given to createImageServer);
// what is active then is the default. A request may choose among the loaded ones instead, as
// diffusers' set_adapters does: `"lora": "style"`, `"lora": [{ "name": "style", "scale": 0.8 }]`,
// or `"lora": []` for none. The choice is resolved here, once, into names and weights (a 400
// naming `lora` for an unknown name, a name twice, or a change the fused weights cannot make);
// the runner applies it before a batch only when it differs from the last one.
import type { DiffusionPipeline } from '../pipelines/diffusion_pipeline.js';
import { RequestError } from './request_error.js';

/** One adapter of a job's choice and its weight. */
export interface LoraWeight {
  /** The adapter's name, one the server loaded. */
  readonly name: string;
  /** Its weight (setAdapters'). */
  readonly scale: number;
}

/** One adapter of a request's `lora` list. */
export interface LoraEntry {
  /** The adapter's name, one the server loaded. */
  name: string;
  /** Its weight (default the adapter's listed scale). */
  scale?: number;
}

/** A request's `lora` as the wire carries it: a name, or a list of names and `{ name, scale }`. */
export type LoraBody = string | readonly (string | LoraEntry)[];

/** An adapter the server loaded, as GET /v1/loras lists it. */
export interface ServedLora {
  /** Its name: what a request's `lora` names. */
  readonly name: string;
  /** Where it was loaded from (a file, folder or hub id), when known. */
  readonly source: string | null;
  /** The weight a request that names it without a scale gets: its weight in the default, else 1. */
  readonly scale: number;
  /** Whether a job that chooses nothing runs it. */
  readonly default: boolean;
}

// the longest adapter name and list a request may give
const MAX_NAME = 128;
const MAX_ADAPTERS = 16;

/** The JSON schema of a request's `lora` (Fastify checks it; the names are checked by resolve). */
export const loraSchema = {
  type: ['string', 'array'],
  maxLength: MAX_NAME,
  maxItems: MAX_ADAPTERS,
  items: {
    type: ['string', 'object'],
    maxLength: MAX_NAME,
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', maxLength: MAX_NAME },
      scale: { type: 'number', minimum: -10, maximum: 10 },
    },
  },
} as const;

/** The adapters a server runs: those loaded, the default choice, and whether they are fused. */
export class ServedLoras {
  /**
   * @param loras The loaded adapters, in the order they were loaded.
   * @param fused Whether they are fused into the weights (then a job cannot choose others).
   */
  constructor(
    readonly loras: readonly ServedLora[],
    readonly fused: boolean,
  ) {}

  /** A server with no adapters. */
  static readonly none = new ServedLoras([], false);

  /** What `pipe` holds now: its loaded adapters, the active ones (with their weights) the default; `sources` by name. */
  static of(pipe: DiffusionPipeline, sources: Readonly<Record<string, string>> = {}): ServedLoras {
    const loaded = [...new Set(Object.values(pipe.getListAdapters()).flat())];
    const active = pipe.getAdapterWeights();
    const loras = loaded.map((name) => ({ name, source: sources[name] ?? null, scale: active[name] ?? 1, default: name in active }));
    return new ServedLoras(loras, pipe.loraFused);
  }

  /** The choice of a job that names none; undefined when no adapter is loaded (nothing to apply). */
  get defaultChoice(): LoraWeight[] | undefined {
    if (this.loras.length === 0) return undefined;
    return this.loras.filter((l) => l.default).map(({ name, scale }) => ({ name, scale }));
  }

  /** A request's `lora` (checked by loraSchema) as names and weights; the default when it has none; a 400 naming `lora` otherwise. */
  resolve(body: LoraBody | undefined): LoraWeight[] | undefined {
    if (body === undefined) return this.defaultChoice;
    const entries = typeof body === 'string' ? [body] : body;
    // none on a server with none: as if not asked (one batch key)
    if (this.loras.length === 0 && entries.length === 0) return undefined;
    const loaded = this.loras.map((l) => l.name);
    const choice = entries.map((e, i) => {
      const { name, scale } = typeof e === 'string' ? { name: e, scale: undefined } : e;
      const known = this.loras.find((l) => l.name === name);
      const at = typeof body === 'string' ? 'lora' : `lora[${i}]`;
      if (!known) {
        throw new RequestError(400, 'lora', `${at}: no LoRA adapter named ${JSON.stringify(name)} is loaded on this server (${loaded.length ? `loaded: ${loaded.map((n) => JSON.stringify(n)).join(', ')}; GET /v1/loras lists them` : 'it has none; start it with --lora NAME=PATH-OR-ID[:SCALE]'})`);
      }
      return { name, scale: scale ?? known.scale };
    });
    const twice = choice.find((c, i) => choice.findIndex((d) => d.name === c.name) !== i);
    if (twice) throw new RequestError(400, 'lora', `lora names the adapter ${JSON.stringify(twice.name)} twice; give each once, with its scale`);
    // in the order they were loaded: a choice runs the same whatever order the request gave
    choice.sort((a, b) => loaded.indexOf(a.name) - loaded.indexOf(b.name));
    if (this.fused && loraKey(choice) !== loraKey(this.defaultChoice ?? [])) {
      throw new RequestError(400, 'lora', `this server's LoRA adapters are fused into the weights (--fuse-lora): every job runs ${describe(this.defaultChoice ?? [])}; leave out lora, or start the server without --fuse-lora to choose per request`);
    }
    return choice;
  }
}

/** A resolved choice as a key (resolve puts it in the order the adapters were loaded). */
export function loraKey(choice: readonly LoraWeight[]): string {
  return JSON.stringify(choice.map((c) => [c.name, c.scale]));
}

function describe(choice: readonly LoraWeight[]): string {
  return choice.length ? choice.map((c) => `${c.name} x${c.scale}`).join(', ') : 'no adapter';
}

/** Makes `choice` the pipeline's active adapters (setAdapters), or turns them off for none (disableLora). */
export function applyLoraChoice(pipe: DiffusionPipeline, choice: readonly LoraWeight[]): void {
  if (choice.length === 0) {
    pipe.disableLora();
    return;
  }
  pipe.setAdapters(
    choice.map((c) => c.name),
    choice.map((c) => c.scale),
  );
  pipe.enableLora();
}
