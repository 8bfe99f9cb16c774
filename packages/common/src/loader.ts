// The single loader of the native addon (dtorch.node). Like sharp's, it tries each candidate
// in order, keeps every error, and ends with remedies for what actually failed.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { config } from './env.js';
import { DTorchError, ErrorCode } from './errors.js';

/** The addon: one slice per package (common, external, core). Each package types its own. */
export type NativeAddon = Record<string, unknown> & {
  /** The common slice, which every other slice relies on. */
  common: {
    /** Registers the class the engine constructs its errors with, `new ctor(code, message)`: {@link DTorchError}. */
    setErrorClass(ctor: unknown): void;
    /** Sets the engine's log level (a {@link LogLevel} name; an unknown one keeps the current level). */
    setLogLevel(level: string): void;
    /** The Node-API version the addon was built for. */
    napiVersion: number;
  };
};

/** One candidate the loader tried, for the failure message. */
export interface LoadAttempt {
  /** The absolute path of the dtorch.node tried. */
  path: string;
  /** Why it did not load: 'not found', or the first line of the error `process.dlopen` threw. */
  error: string;
}

const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = resolve(here, '..');
const repoRoot = resolve(packageRoot, '..', '..');

/**
 * Whether this package is the repository's source folder (packages/common of a checkout), where
 * the root's setup builds one addon into <repo>/build; else it is an installed package, whose
 * install script built the addon into its own build/ folder.
 */
export const inRepository =
  existsSync(join(repoRoot, 'turbo.json')) && existsSync(join(repoRoot, 'native')) && resolve(repoRoot, 'packages', 'common') === packageRoot;

/** The command that builds the addon again: in a checkout, or where the package is installed. */
function rebuildCommandOf(checkout: boolean): string {
  return checkout ? '`npm run setup` at the repository root' : '`npm rebuild @dtorch/common` in your project';
}

/** npm 11 runs (and later, by default, skips) dependencies' install scripts only once approved. */
const approveScripts = '`npm install-scripts approve @dtorch/common zeromq protobufjs`';

/**
 * Where the addon may be: the file DTORCH_NATIVE_PATH names, alone (a setting that names a file
 * that does not load is an error, never a silent fallback to another build), else this
 * checkout's or this package's build.
 */
export function defaultCandidates(): string[] {
  if (config.nativePath) return [resolve(config.nativePath)];
  return [join(inRepository ? repoRoot : packageRoot, 'build', 'Release', 'dtorch.node')];
}

/** The LibTorch an addon was built against, from the torch.json the build wrote beside it. */
function builtAgainst(addonPath: string): { cmakePrefixPath: string; version: string } | undefined {
  try {
    const record = JSON.parse(readFileSync(join(dirname(addonPath), 'torch.json'), 'utf8')) as { cmakePrefixPath?: unknown; version?: unknown };
    if (typeof record.cmakePrefixPath === 'string') return { cmakePrefixPath: record.cmakePrefixPath, version: String(record.version) };
  } catch {
    // no record (a build from before torch.json, or DTORCH_NATIVE_PATH's): the remedy stays general
  }
  return undefined;
}

function remedies(attempts: LoadAttempt[], checkout: boolean): string[] {
  const rebuildCommand = rebuildCommandOf(checkout);
  const text = attempts.map((a) => a.error).join('\n');
  const out: string[] = [];
  const named = config.nativePath ? resolve(config.nativePath) : undefined;
  if (named && attempts.some((a) => a.path === named)) {
    out.push(`DTORCH_NATIVE_PATH=${config.nativePath} names this addon${existsSync(named) ? ', which does not load (below)' : ', which does not exist'}: point it at a`);
    out.push('built dtorch.node, or unset it to load the build of this checkout or package.');
  } else if (attempts.every((a) => a.error.startsWith('not found'))) {
    if (checkout) {
      out.push('The addon has not been built. Run `npm install` at the repository root (it finds LibTorch and builds),');
      out.push('or `npm run build:native` if setup already ran. Set DTORCH_NATIVE_PATH to use a build elsewhere.');
    } else {
      out.push('The addon has not been built: @dtorch/common builds it when it is installed (installed with --ignore-scripts,');
      out.push(`its install script not approved (npm 11: ${approveScripts}), or its build failed?).`);
      out.push('Run `npm rebuild @dtorch/common` in your project: it needs a C++ compiler, cmake and a LibTorch');
      out.push('(LIBTORCH=/path/to/libtorch picks one; else a Python torch, else it pip-installs one). Set');
      out.push('DTORCH_NATIVE_PATH to use a build elsewhere.');
    }
  }
  const missingLibrary = /(lib\S+\.so[.\d]*): cannot open shared object/.exec(text);
  if (missingLibrary && /libtorch|libc10|libnccl|libcudart/.test(missingLibrary[1]!)) {
    const moved = attempts.map((a) => a.error.includes('cannot open shared object') && builtAgainst(a.path)).find((b) => b);
    if (moved) {
      out.push(`The addon was built against LibTorch ${moved.version} at ${moved.cmakePrefixPath}, and ${missingLibrary[1]} is no longer in ${join(moved.cmakePrefixPath, 'lib')} (LibTorch moved, or its virtual environment was removed).`);
      out.push(`Put it back there, or build against the LibTorch you have now: ${rebuildCommand} (LIBTORCH=/path/to/libtorch picks one).`);
    } else {
      out.push(`LibTorch is not where the addon was built against (${missingLibrary[1]} is missing). Run ${rebuildCommand}`);
      out.push('to find it again and rebuild, or set LIBTORCH=/path/to/libtorch first.');
    }
  }
  if (/GLIBCXX|CXXABI|GLIBC_/.test(text)) {
    out.push('The C++ runtime is older than the one the addon or LibTorch needs: rebuild on this machine');
    out.push(`(${rebuildCommand}) or install a newer libstdc++ (apt-get install libstdc++6).`);
  }
  if (/undefined symbol/.test(text)) {
    out.push('The addon and LibTorch do not match (built against another torch version or C++ ABI).');
    out.push(`Rebuild against the LibTorch found now: ${rebuildCommand}.`);
  }
  if (/invalid ELF header|wrong ELF class|architecture/.test(text)) {
    out.push(`The addon was built for another processor or OS: rebuild here with ${rebuildCommand}.`);
  }
  if (out.length === 0) out.push(`Rebuild with ${rebuildCommand}; run with DTORCH_LOG=debug for details.`);
  return out;
}

/**
 * The NATIVE_ADDON_MISSING message for `attempts`: each path and why it failed, then the remedies
 * for the failures seen (a DTORCH_NATIVE_PATH that does not load, not built, LibTorch moved, an
 * old C++ runtime, a mismatched build), with the commands of a checkout or, `checkout` false, of
 * a project that installed the packages.
 */
export function formatLoadFailure(attempts: LoadAttempt[], checkout = inRepository): string {
  const lines = ['Could not load the DTorch native addon (dtorch.node). Tried:'];
  for (const a of attempts) lines.push(`  - ${a.path}: ${a.error}`);
  lines.push('How to fix:');
  for (const r of remedies(attempts, checkout)) lines.push(`  ${r}`);
  return lines.join('\n');
}

let cached: NativeAddon | undefined;

// Only a Node addon is loaded: `require` would also run a .js or .json file (or a folder's
// index.js) that a setting or a planted file names, so a candidate is refused before it is opened.
function refuseNonAddon(path: string): DTorchError {
  const named = config.nativePath !== undefined && resolve(config.nativePath) === path;
  const what = named ? `DTORCH_NATIVE_PATH=${config.nativePath}` : path;
  return new DTorchError(
    ErrorCode.NativeMissing,
    `${what} is not a Node addon: only a .node file (a built dtorch.node) is loaded, nothing else is run; point it at one${named ? ', or unset it' : ''}.`,
  );
}

/**
 * Loads the addon from the first candidate that works, with `process.dlopen` (a shared library,
 * never a script). Throws a DTorchError with code NATIVE_ADDON_MISSING: one line for a candidate
 * that is not a `.node` file (nothing is loaded), else one listing every candidate and why it failed.
 */
export function loadNative(candidates: string[] = defaultCandidates()): NativeAddon {
  for (const path of candidates) if (extname(path) !== '.node') throw refuseNonAddon(path);
  const attempts: LoadAttempt[] = [];
  for (const path of candidates) {
    if (!existsSync(path)) {
      attempts.push({ path, error: 'not found' });
      continue;
    }
    try {
      const module = { exports: {} as NativeAddon };
      process.dlopen(module, resolve(path));
      return module.exports;
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
