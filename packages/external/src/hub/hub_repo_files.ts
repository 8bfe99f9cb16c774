// HubRepoFiles: a hub repository at one revision, its files in the standard HF cache, laid out
// as Python's huggingface_hub reads and writes it:
//   <cacheDir>/models--org--name/refs/<revision>             the commit hash the revision is at
//   <cacheDir>/models--org--name/blobs/<etag>                 the bytes (sha256 for LFS files, git sha1 else)
//   <cacheDir>/models--org--name/snapshots/<commit>/<path>    relative symlinks into blobs/
// Online, opening asks the hub for the revision's commit and file list (one call); fetch downloads
// only the files not in the snapshot yet, through @huggingface/hub's downloadFileToCacheDir.
// Offline (localFilesOnly, HF_HUB_OFFLINE=1), nothing touches the network: the revision is read
// from refs/ and the files are what the snapshot holds.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { hubError, type HubErrorContext } from './hub_errors.js';
import { hubFetch, type HubCall, type ProgressSink } from './hub_fetch.js';
import type { RepoFiles } from './repo_files.js';

const COMMIT_HASH = /^[0-9a-f]{40}$/;

/** What a HubRepoFiles needs beyond the repository and revision (resolved from options and env). */
export interface HubSettings {
  /** The HF cache folder (HF_HUB_CACHE's layout: models--org--name/blobs, refs, snapshots), shared with huggingface_hub. */
  cacheDir: string;
  /** The hub's address without a trailing '/', e.g. https://huggingface.co (HF_ENDPOINT). */
  hubUrl: string;
  /** The access token sent to the hub for gated or private repositories; undefined for none. */
  token: string | undefined;
  /** Resolve from the cache alone and never call the hub (transformers' local_files_only). */
  offline: boolean;
  /** Why offline mode is on, for messages: 'localFilesOnly: true' or 'HF_HUB_OFFLINE=1'. */
  offlineReason: string;
  /** Where the byte counts of downloads go. */
  progress: ProgressSink;
}

/** The cache folder of a model repository: models--org--name. */
export function repoFolderName(repoId: string): string {
  return ['models', ...repoId.split('/')].join('--');
}

// A repository path that stays inside the snapshot folder (no '..', not absolute).
function checkRepoPath(repo: string, path: string): void {
  const parts = path.replace(/\\/g, '/').split('/');
  if (typeof path !== 'string' || path.length === 0 || path.startsWith('/') || /^[a-zA-Z]:/.test(path) ||
      parts.some((p) => p === '..' || p === '.' || p === '')) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected a file path inside ${repo} such as "text_encoder/config.json" but received ${JSON.stringify(path)}`);
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isFile() ?? false;
  } catch {
    return false; // ENOTDIR and the like: no file there
  }
}

// Every file (symlinks followed) under a snapshot folder, '/'-separated, sorted.
function snapshotFiles(root: string): string[] {
  if (!existsSync(root)) return [];
  return (readdirSync(root, { recursive: true }) as string[])
    .filter((p) => isFile(join(root, p)))
    .map((p) => p.split(sep).join('/'))
    .sort();
}

// One download at a time per cache folder in this process: two files with the same bytes share a
// blob, and the library writes blobs/<etag>.incomplete under one fixed name.
const queues = new Map<string, Promise<unknown>>();
function oneAtATime<T>(key: string, task: () => Promise<T>): Promise<T> {
  const run = (queues.get(key) ?? Promise.resolve()).then(task, task);
  const settled = run.catch(() => undefined);
  queues.set(key, settled);
  void settled.then(() => {
    if (queues.get(key) === settled) queues.delete(key);
  });
  return run;
}

// downloadFileToCacheDir writes `Downloading <path> to <blob>.incomplete` with console.debug, on
// stdout: drop that line (only that line) while a download runs.
let quietDepth = 0;
let savedDebug: typeof console.debug | undefined;
async function withoutLibraryChatter<T>(task: () => Promise<T>): Promise<T> {
  if (quietDepth++ === 0) {
    savedDebug = console.debug;
    const forward = savedDebug;
    console.debug = (...args: unknown[]) => {
      if (typeof args[0] === 'string' && /^Downloading .* to .*\.incomplete$/s.test(args[0])) return;
      forward.apply(console, args);
    };
  }
  try {
    return await task();
  } finally {
    if (--quietDepth === 0 && savedDebug) {
      console.debug = savedDebug;
      savedDebug = undefined;
    }
  }
}

/**
 * A hub repository at one commit, read through the standard HF cache as huggingface_hub's
 * `hf_hub_download` does: files already cached are used as they are, others are downloaded into
 * the cache when asked for. {@link openRepo} makes one from a hub id.
 */
export class HubRepoFiles implements RepoFiles {
  /** `org/name@revision`. */
  readonly description: string;
  /** The snapshot folder: <cacheDir>/models--org--name/snapshots/<commit> (it may not exist before a fetch). */
  readonly root: string;
  /** The repository's hub id, `name` or `org/name`. */
  readonly repoId: string;
  /** The revision as given (branch, tag or commit hash). */
  readonly revision: string;
  /** The commit the revision is at. */
  readonly commit: string;
  /** The HF cache folder. */
  readonly cacheDir: string;
  /** True when resolved from the cache alone (localFilesOnly or HF_HUB_OFFLINE). */
  readonly offline: boolean;
  readonly #storage: string;
  readonly #settings: HubSettings;
  // online: the hub's file list at the commit; offline: read from the snapshot on demand
  readonly #listed: ReadonlySet<string> | undefined;

  private constructor(repoId: string, revision: string, commit: string, settings: HubSettings, listed: string[] | undefined) {
    this.repoId = repoId;
    this.revision = revision;
    this.commit = commit;
    this.cacheDir = settings.cacheDir;
    this.offline = settings.offline;
    this.description = `${repoId}@${revision}`;
    this.#storage = join(settings.cacheDir, repoFolderName(repoId));
    this.root = join(this.#storage, 'snapshots', commit);
    this.#settings = settings;
    this.#listed = listed === undefined ? undefined : new Set(listed);
  }

  /** Resolves `revision` of `repoId`: from the hub (one call), or offline from refs/ in the cache. */
  static async open(repoId: string, revision: string, settings: HubSettings): Promise<HubRepoFiles> {
    const storage = join(settings.cacheDir, repoFolderName(repoId));
    if (settings.offline) {
      const commit = COMMIT_HASH.test(revision) ? revision : readRef(storage, revision);
      const label = `${repoId}@${revision}`;
      const offFix = `offline mode is on (${settings.offlineReason}); turn it off to download it`;
      if (commit === undefined) {
        throw new DTorchError(ErrorCode.NotFound, `${label} is not in the HF cache at ${settings.cacheDir} (no ${join(storage, 'refs', revision)}) and ${offFix}`);
      }
      if (!existsSync(join(storage, 'snapshots', commit))) {
        throw new DTorchError(ErrorCode.NotFound, `${label} is not in the HF cache at ${settings.cacheDir} (no snapshot ${commit}) and ${offFix}`);
      }
      return new HubRepoFiles(repoId, revision, commit, settings, undefined);
    }

    const call: HubCall = {};
    const ctx = errorContext(repoId, revision, undefined, settings, call, storage);
    try {
      const { modelInfo } = await import('@huggingface/hub');
      const info = await modelInfo({
        name: repoId,
        revision,
        hubUrl: settings.hubUrl,
        additionalFields: ['sha', 'filePaths'],
        fetch: hubFetch({ hubUrl: settings.hubUrl, token: settings.token, call }),
      });
      if (typeof info.sha !== 'string' || !COMMIT_HASH.test(info.sha)) {
        throw new Error(`no commit hash for the revision (sha ${JSON.stringify(info.sha)})`);
      }
      return new HubRepoFiles(repoId, revision, info.sha, settings, info.filePaths ?? []);
    } catch (err) {
      throw hubError(err, ctx, settings.token);
    }
  }

  list(): readonly string[] {
    return this.#listed ? [...this.#listed].sort() : snapshotFiles(this.root);
  }

  has(path: string): boolean {
    return this.#listed ? this.#listed.has(path) : isFile(join(this.root, path));
  }

  async fetch(paths: readonly string[]): Promise<string[]> {
    for (const path of paths) checkRepoPath(this.repoId, path);
    for (const path of paths) {
      if (this.has(path)) continue;
      if (this.offline) {
        throw new DTorchError(ErrorCode.NotFound,
          `${this.description}: ${path} is not in the HF cache (${this.root}) and offline mode is on (${this.#settings.offlineReason}); ` +
          'turn it off (localFilesOnly: false, HF_HUB_OFFLINE unset) to download it');
      }
      throw new DTorchError(ErrorCode.NotFound, `${this.description} has no file ${path} (the repository at commit ${this.commit} does not list it)`);
    }
    if (this.offline) return paths.map((path) => join(this.root, path));

    const missing = [...new Set(paths)].filter((path) => !isFile(join(this.root, path)));
    if (missing.length > 0) {
      try {
        this.#writeRef();
      } catch (err) {
        throw hubError(err, errorContext(this.repoId, this.revision, undefined, this.#settings, {}, this.#storage), this.#settings.token);
      }
      for (const path of missing) await oneAtATime(this.#storage, () => this.#download(path));
    }
    return paths.map((path) => join(this.root, path));
  }

  // refs/<revision> -> commit, as Python writes it (a branch or tag name; never for a commit hash)
  #writeRef(): void {
    if (this.revision === this.commit) return;
    const ref = join(this.#storage, 'refs', this.revision);
    if (readRef(this.#storage, this.revision) === this.commit) return;
    mkdirSync(dirname(ref), { recursive: true });
    writeFileSync(ref, this.commit);
  }

  async #download(path: string): Promise<void> {
    const local = join(this.root, path);
    if (isFile(local)) return; // another fetch brought it meanwhile
    const { hubUrl, token, progress } = this.#settings;
    const call: HubCall = {};
    const ctx = errorContext(this.repoId, this.revision, path, this.#settings, call, this.#storage);
    try {
      const { downloadFileToCacheDir } = await import('@huggingface/hub');
      const params: Parameters<typeof downloadFileToCacheDir>[0] & { xet: boolean } = {
        repo: { type: 'model', name: this.repoId },
        path,
        // the commit, not the branch: the library then names the snapshot by it (by the file's
        // last commit otherwise) and finds a cached file with no network call
        revision: this.commit,
        cacheDir: this.cacheDir,
        hubUrl,
        fetch: hubFetch({ hubUrl, token, call, progress: { file: path, sink: progress } }),
        // plain HTTP from the hub (as Python without hf_xet), never the xet CAS protocol
        xet: false,
      };
      const pointer = await withoutLibraryChatter(() => downloadFileToCacheDir(params));
      if (pointer !== local) throw new Error(`the file landed at ${pointer}, not at ${local}`);
    } catch (err) {
      progress.end(path, false);
      throw hubError(err, ctx, token);
    }
  }
}

function readRef(storage: string, revision: string): string | undefined {
  const ref = join(storage, 'refs', revision);
  if (!isFile(ref)) return undefined;
  const commit = readFileSync(ref, 'utf8').trim();
  return COMMIT_HASH.test(commit) ? commit : undefined;
}

function errorContext(repoId: string, revision: string, file: string | undefined, settings: HubSettings, call: HubCall, storage: string): HubErrorContext {
  const commit = COMMIT_HASH.test(revision) ? revision : readRef(storage, revision);
  const cached = commit !== undefined && existsSync(join(storage, 'snapshots', commit)) &&
    (file === undefined || isFile(join(storage, 'snapshots', commit, file)));
  return {
    repoId,
    revision,
    ...(file !== undefined && { file }),
    hubUrl: settings.hubUrl,
    withToken: settings.token !== undefined,
    call,
    ...(cached && {
      cachedHint: `The HF cache holds ${repoId}@${revision}${file === undefined ? '' : ` with ${file}`}: pass localFilesOnly: true or set HF_HUB_OFFLINE=1 to use it without the network`,
    }),
  };
}
