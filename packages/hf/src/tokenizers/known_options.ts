// Options objects: refused when not an object or when they hold a name the function does not take,
// so that a misspelt or snake_case option ("max_length") fails instead of being ignored.
import { DTorchError, ErrorCode, checkOptions } from '@dtorch/common';

const camelCase = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

export function checkKnownOptions<T extends object>(name: string, value: unknown, known: readonly (keyof T & string)[]): Partial<T> {
  const options = checkOptions<T>(name, value);
  for (const key of Object.keys(options)) {
    if ((known as readonly string[]).includes(key)) continue;
    const hint = (known as readonly string[]).includes(camelCase(key)) ? ` (did you mean ${camelCase(key)}? options are camelCase)` : '';
    throw new DTorchError(ErrorCode.InvalidArgument, `Unknown option ${JSON.stringify(key)} in ${name}${hint}; the options are ${known.join(', ')}`);
  }
  return options;
}
