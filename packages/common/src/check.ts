// Argument checks with one message format (as sharp's is.mjs): "Expected <what> for <name>
// but received <value> of type <type>". Public functions validate here; native code then
// receives already-checked plain values.
import { DTorchError, ErrorCode } from './errors.js';

/** A short rendering of `value` for an error message: strings quoted, arrays element by element, objects by their class name. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(describeValue).join(', ')}]`;
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object') return (value as object).constructor?.name ?? 'object';
  if (typeof value === 'function') return value.name ? `function ${value.name}` : 'function';
  return String(value); // String(), not a template: a Symbol converts only this way
}

/**
 * `text` (a line of a file, say) quoted for a one-line message: JSON's escapes, and every other
 * non-printing character (C1 controls, format and unassigned code points) as `\u` escapes, so
 * that a binary file's bytes never reach the terminal raw; cut after `max` characters.
 */
export function quoteText(text: string, max = 40): string {
  const chars = [...text];
  const shown = JSON.stringify(chars.slice(0, max).join('')).replace(/[\p{C}\u2028\u2029]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
  return chars.length > max ? `${shown}... (${chars.length} characters)` : shown;
}

/**
 * The INVALID_ARGUMENT {@link DTorchError} for parameter `name`, in the one message format:
 * "Expected `expected` for `name` but received `value` of type `type`". Returned, not thrown.
 */
export function invalidParameter(name: string, expected: string, value: unknown): DTorchError {
  const type = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  return new DTorchError(
    ErrorCode.InvalidArgument,
    `Expected ${expected} for ${name} but received ${describeValue(value)} of type ${type}`,
  );
}

/**
 * An exact integer: a JS number of magnitude below 2^53. Larger doubles skip integers (2^53 + 1
 * reads as 2^53), so no size, index, dim or count is one; native code casts these to int64.
 */
export function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

function integerWanted(min: number, max: number, value: unknown): string {
  const what =
    max === Infinity
      ? min === 0 ? 'non-negative integer' : min === 1 ? 'positive integer' : min === -Infinity ? 'integer' : `integer >= ${min}`
      : `integer in [${min === -Infinity ? '-(2^53 - 1)' : min}, ${max}]`;
  const unsafe = typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value);
  return unsafe && max === Infinity ? `${what} of magnitude below 2^53` : what;
}

/** An exact integer in [min, max]; anything else (fractions, NaN, ±Infinity, 2^53 and beyond) is refused. */
export function checkInteger(name: string, value: unknown, min = -Infinity, max = Infinity): number {
  if (!isInteger(value) || value < min || value > max) throw invalidParameter(name, integerWanted(min, max, value), value);
  return value;
}

/** `value` if it is a number other than NaN (±Infinity passes; {@link checkFinite} refuses it), else INVALID_ARGUMENT naming `name`. */
export function checkNumber(name: string, value: unknown): number {
  if (typeof value !== 'number' || Number.isNaN(value)) throw invalidParameter(name, 'number', value);
  return value;
}

/** A finite number >= min (NaN and ±Infinity are refused). */
export function checkFinite(name: string, value: unknown, min = -Infinity): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw invalidParameter(name, min === -Infinity ? 'finite number' : min === 0 ? 'finite non-negative number' : `finite number >= ${min}`, value);
  }
  return value;
}

/** `value` if it is true or false (not a stand-in such as 1 or the empty string), else INVALID_ARGUMENT naming `name`. */
export function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw invalidParameter(name, 'boolean', value);
  return value;
}

/** A shape: an array of non-negative integers. */
export function checkShape(name: string, value: unknown): number[] {
  if (!Array.isArray(value) || !value.every((d) => isInteger(d) && d >= 0)) {
    throw invalidParameter(name, 'shape (array of non-negative integers)', value);
  }
  return value as number[];
}

const NO_OPTIONS: Readonly<Record<string, never>> = Object.freeze({});

/**
 * An options object (undefined gives an empty, frozen one): a plain `{ ... }` literal. Anything else is refused,
 * class instances too (a Tensor where options go is a misplaced argument, not options).
 */
export function checkOptions<T extends object>(name: string, value: unknown): Partial<T> {
  if (value === undefined || value === null) return NO_OPTIONS as Partial<T>; // shared: ops on the hot path pass none
  const proto = typeof value === 'object' ? Object.getPrototypeOf(value) : undefined;
  if (proto !== Object.prototype && proto !== null) throw invalidParameter(name, 'options object', value);
  return value as Partial<T>;
}

const camelCase = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * An options object that holds only `known` names: a misspelt or snake_case option
 * ("max_length") is an error naming the options, not silently ignored.
 */
export function checkKnownOptions<T extends object>(name: string, value: unknown, known: readonly string[]): Partial<T> {
  const options = checkOptions<T>(name, value);
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const hint = known.includes(camelCase(key)) ? ` (did you mean ${camelCase(key)}? options are camelCase)` : '';
    throw new DTorchError(ErrorCode.InvalidArgument, `Unknown option ${JSON.stringify(key)} in ${name}${hint}; the options are ${known.join(', ')}`);
  }
  return options;
}

/** A shape as messages write it, e.g. `[2, 3]`, the way PyTorch prints `torch.Size`. */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}
