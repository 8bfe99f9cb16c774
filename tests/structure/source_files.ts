// The source files under a folder, for the structure tests that read code as text.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

// Every file below `dir` whose name matches `names`, leaving out what `skip` says (folders whole).
export function sourceFiles(dir: string, names: RegExp, skip: (path: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (skip(path)) return [];
    if (entry.isDirectory()) return sourceFiles(path, names, skip);
    return names.test(entry.name) ? [path] : [];
  });
}
