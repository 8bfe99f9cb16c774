// Reading a config file (config.json and friends) into typed values: each key read with its
// type, transformers' or diffusers' default when absent, and one error format naming the file
// and the key when a required key is missing or a value has the wrong type. Keys nobody reads
// are kept (`extra`), as transformers keeps them on its config objects.
import { readFileSync } from 'node:fs';
import { DTorchError, ErrorCode, describeValue } from '@dtorch/common';

/** A JSON value, as JSON.parse gives it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object: a config file's top level, or a nested config in it. */
export type JsonObject = { [key: string]: Json };

/** Reads and parses `path` as a JSON object; a missing file or bad JSON is a DTorchError naming it. */
export function readJsonFile(path: string): JsonObject {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new DTorchError(ErrorCode.NotFound, `${path}: cannot read: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new DTorchError(ErrorCode.BadConfig, `${path}: not valid JSON (${(err as Error).message})`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new DTorchError(ErrorCode.BadConfig, `${path}: expected a JSON object`);
  return json as JsonObject;
}

type Kind = 'integer' | 'number' | 'string' | 'boolean';

const is: Record<Kind, (v: unknown) => boolean> = {
  // exact integers only: 1e300 is an integer to JS but no size or count
  integer: (v) => typeof v === 'number' && Number.isSafeInteger(v),
  number: (v) => typeof v === 'number' && Number.isFinite(v),
  string: (v) => typeof v === 'string',
  boolean: (v) => typeof v === 'boolean',
};

/** Typed reads of one config object; remembers which keys were read. */
export class ConfigReader {
  /** The file the keys come from, as errors name it ('X (from a dict)' for a config built in code). */
  readonly file: string;
  /** The parsed object, every key as the file has it. */
  readonly json: JsonObject;
  readonly #read = new Set<string>();

  constructor(file: string, json: JsonObject) {
    this.file = file;
    this.json = json;
  }

  /** A reader of the JSON object in `path` (see {@link readJsonFile} for the errors). */
  static fromFile(path: string): ConfigReader {
    return new ConfigReader(path, readJsonFile(path));
  }

  /** The error for `key`: what was wrong and what the key should hold. */
  bad(key: string, expected: string, value?: unknown): DTorchError {
    const got = value === undefined ? 'it is missing' : `got ${describeValue(value)}`;
    return new DTorchError(ErrorCode.BadConfig, `${this.file}: "${key}" must be ${expected}; ${got}`);
  }

  #get(key: string, kind: Kind, fallback: unknown, required: boolean, nullable: boolean): unknown {
    this.#read.add(key);
    const value = this.json[key];
    if (value === undefined || (value === null && !nullable)) {
      if (required) throw this.bad(key, `${article(kind)} ${kind}`);
      return fallback;
    }
    if (value === null) return null;
    if (!is[kind](value)) throw this.bad(key, `${article(kind)} ${kind}${nullable ? ' or null' : ''}`, value);
    return value;
  }

  /** An integer; `fallback` when absent (or a BAD_CONFIG error when there is no fallback). */
  integer(key: string, fallback?: number): number {
    return this.#get(key, 'integer', fallback, fallback === undefined, false) as number;
  }

  /** A finite number; `fallback` when absent (or a BAD_CONFIG error when there is no fallback). */
  number(key: string, fallback?: number): number {
    return this.#get(key, 'number', fallback, fallback === undefined, false) as number;
  }

  /** A string; `fallback` when absent (or a BAD_CONFIG error when there is no fallback). */
  string(key: string, fallback?: string): string {
    return this.#get(key, 'string', fallback, fallback === undefined, false) as string;
  }

  /** A boolean; `fallback` when absent (or a BAD_CONFIG error when there is no fallback). */
  boolean(key: string, fallback?: boolean): boolean {
    return this.#get(key, 'boolean', fallback, fallback === undefined, false) as boolean;
  }

  /** An integer, null, or absent (`fallback`). */
  optionalInteger(key: string, fallback: number | null = null): number | null {
    return this.#get(key, 'integer', fallback, false, true) as number | null;
  }

  /** A string, null, or absent (`fallback`). */
  optionalString(key: string, fallback: string | null = null): string | null {
    return this.#get(key, 'string', fallback, false, true) as string | null;
  }

  /** One of `choices`. */
  oneOf<T extends string>(key: string, choices: readonly T[], fallback?: T): T {
    const value = this.string(key, fallback);
    if (!choices.includes(value as T)) throw this.bad(key, `one of ${choices.map((c) => JSON.stringify(c)).join(', ')}`, value);
    return value as T;
  }

  /** A string among `names`, with the list in the error (an activation, a scheduler type). */
  name(key: string, names: readonly string[], fallback?: string): string {
    const value = this.string(key, fallback);
    if (!names.includes(value)) throw this.bad(key, `a known name (${names.join(', ')})`, value);
    return value;
  }

  /** A nested object (e.g. CLIPConfig's "text_config"), as a reader of its own. */
  nested(key: string): ConfigReader | undefined {
    this.#read.add(key);
    const value = this.json[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'object' || Array.isArray(value)) throw this.bad(key, 'an object', value);
    return new ConfigReader(`${this.file} (${key})`, value);
  }

  /** Keys that the file repeats but the config derives from others (not kept in `extra`). */
  derived(...keys: string[]): void {
    for (const key of keys) this.#read.add(key);
  }

  /** Keys present in the file that no read asked for (kept, not an error). */
  unread(): JsonObject {
    return Object.fromEntries(Object.entries(this.json).filter(([k]) => !this.#read.has(k)));
  }
}

const article = (kind: Kind) => (kind === 'integer' ? 'an' : 'a');
