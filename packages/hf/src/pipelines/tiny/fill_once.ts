// A folder in the temporary folder filled once: written beside its final name, then renamed, so a
// concurrent process never sees half a folder; a marker file says it is complete.
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** `folder`, filled by `fill(staging)` the first time it is asked for (by any process). */
export function fillOnce(folder: string, fill: (staging: string) => void): string {
  if (existsSync(join(folder, '.complete'))) return folder;
  const staging = `${folder}.${process.pid}.${Date.now()}`;
  mkdirSync(staging, { recursive: true });
  try {
    fill(staging);
    writeFileSync(join(staging, '.complete'), '');
    renameSync(staging, folder);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    // another process got there first: its folder is complete
    if (existsSync(join(folder, '.complete'))) return folder;
    throw err;
  }
  return folder;
}
