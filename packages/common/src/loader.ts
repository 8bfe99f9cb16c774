// The single loader of the native addon (dtorch.node). Like sharp's, it tries each candidate
// in order, keeps every error, and ends with remedies for what actually failed.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { config } from './env.js';
import { DTorchError, ErrorCode } from './errors.js';

/** The addon: one slice per package (common, external, core). Each package types its own. */
export type NativeAddon = Record<string, unknown> & {
  common: { setErrorClass(ctor: unknown): void; setLogLevel(level: string): void; napiVersion: number };
};

export interface LoadAttempt {
  path: string;
  error: string;
}

const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = resolve(here, '..');
const repoRoot = resolve(packageRoot, '..', '..');

/** Where the addon may be, in the order tried. */
export function defaultCandidates(): string[] {
  const candidates: string[] = [];
  if (config.nativePath) candidates.push(resolve(config.nativePath));
  candidates.push(join(repoRoot, 'build', 'Release', 'dtorch.node')); // the repo's build
  candidates.push(join(packageRoot, 'build', 'Release', 'dtorch.node')); // a package-local build
  return candidates;
}

function remedies(attempts: LoadAttempt[]): string[] {
  const text = attempts.map((a) => a.error).join('\n');
  const out: string[] = [];
  if (attempts.every((a) => a.error.startsWith('not found'))) {
    out.push('The addon has not been built. Run `npm install` at the repository root (it finds LibTorch and builds),');
    out.push('or `npm run build:native` if setup already ran. Set DTORCH_NATIVE_PATH to use a build elsewhere.');
  }
  if (/libtorch|libc10/.test(text) && /cannot open shared object/.test(text)) {
    out.push('LibTorch is not where the addon was built against (moved or deleted .venv?). Run `npm run setup` to find');
    out.push('it again and rebuild, or set LIBTORCH=/path/to/libtorch first.');
  }
  if (/GLIBCXX|CXXABI|GLIBC_/.test(text)) {
    out.push('The C++ runtime is older than the one the addon or LibTorch needs: rebuild on this machine');
    out.push('(`npm run setup`) or install a newer libstdc++ (apt-get install libstdc++6).');
  }
  if (/undefined symbol/.test(text)) {
    out.push('The addon and LibTorch do not match (built against another torch version or C++ ABI).');
    out.push('Remove build/ and run `npm run setup` to rebuild against the LibTorch found now.');
  }
  if (/invalid ELF header|wrong ELF class|architecture/.test(text)) {
    out.push('The addon was built for another processor or OS: rebuild here with `npm run setup`.');
  }
  if (out.length === 0) out.push('Rebuild with `npm run setup`; run with DTORCH_LOG=debug for details.');
  return out;
}

export function formatLoadFailure(attempts: LoadAttempt[]): string {
  const lines = ['Could not load the DTorch native addon (dtorch.node). Tried:'];
  for (const a of attempts) lines.push(`  - ${a.path}: ${a.error}`);
  lines.push('How to fix:');
  for (const r of remedies(attempts)) lines.push(`  ${r}`);
  return lines.join('\n');
}

let cached: NativeAddon | undefined;

/**
 * Loads the addon from the first candidate that works. Throws a DTorchError with code
 * NATIVE_ADDON_MISSING listing every candidate and why it failed.
 */
export function loadNative(candidates: string[] = defaultCandidates()): NativeAddon {
  const require = createRequire(import.meta.url);
  const attempts: LoadAttempt[] = [];
  for (const path of candidates) {
    if (!existsSync(path)) {
      attempts.push({ path, error: 'not found' });
      continue;
    }
    try {
      return require(path) as NativeAddon;
    } catch (err) {
      attempts.push({ path, error: (err as Error).message.split('\n')[0] ?? String(err) });
    }
  }
  throw new DTorchError(ErrorCode.NativeMissing, formatLoadFailure(attempts));
}

/** The process-wide addon, loaded once, with DTorchError and the log level registered. */
export function native(): NativeAddon {
  if (!cached) {
    const addon = loadNative();
    addon.common.setErrorClass(DTorchError);
    addon.common.setLogLevel(config.logLevel);
    cached = addon;
  }
  return cached;
}
