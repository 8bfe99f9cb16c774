// openRepo: a model source as the user gives it (a local folder, or a hub id `org/name`) to the
// RepoFiles the loaders read. Hub repositories resolve through the standard HF cache.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { DTorchError, ErrorCode, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { readHubEnv } from './hub_env.js';
import type { DownloadProgress } from './hub_fetch.js';
import { HubRepoFiles } from './hub_repo_files.js';
import { progressSink } from './progress.js';
import { LocalRepoFiles, type RepoFiles } from './repo_files.js';

/** Where files come from, as transformers' from_pretrained takes it (camelCase). */
export interface RepoOptions {
  /** Branch, tag or commit of a hub repository (default 'main'). */
  revision?: string;
  /** The HF cache folder (default HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). */
  cacheDir?: string;
  /** Resolve from the cache only, with no network call (also HF_HUB_OFFLINE=1). */
  localFilesOnly?: boolean;
  /** Access token for gated or private repositories (default HF_TOKEN, else the `hf auth login` token file); sent as a header, never printed. */
  token?: string;
  /** The hub's address (default HF_ENDPOINT, else https://huggingface.co). */
  hubUrl?: string;
  /**
   * Bytes of each file as it downloads (nothing for a file already in the cache). Without it, a
   * bar per file is drawn on stderr when stderr is a terminal (not with HF_HUB_DISABLE_PROGRESS_BARS=1).
   */
  onProgress?: (progress: DownloadProgress) => void;
}

/** The names of RepoOptions, for callers that pass them through from their own options. */
export const REPO_OPTION_NAMES = ['revision', 'cacheDir', 'localFilesOnly', 'token', 'hubUrl', 'onProgress'] as const;

// HF's repo id rule (huggingface_hub validate_repo_id): `name` or `namespace/name`, each 1 to 96
// of [A-Za-z0-9_.-] starting and ending with a letter, digit or '_'; no '--' or '..'; no '.git' end.
const REPO_PART = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/;

/** Whether `id` is a well-formed hub repository id (`name` or `org/name`). */
export function isHubRepoId(id: string): boolean {
  const parts = id.split('/');
  return parts.length <= 2 && parts.every((p) => REPO_PART.test(p)) && !id.includes('--') && !id.includes('..') && !id.endsWith('.git');
}

// A branch, tag or commit: also a path under refs/ in the cache, so no '..' or empty segment.
function checkRevision(revision: unknown): string {
  if (typeof revision !== 'string' || revision.length === 0 || revision.startsWith('/') ||
      revision.split('/').some((p) => p === '' || p === '.' || p === '..') || /[\\\0]/.test(revision)) {
    throw invalidParameter('options.revision', 'branch, tag or commit hash', revision);
  }
  return revision;
}

function checkString(name: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) throw invalidParameter(name, 'non-empty string', value);
  return value;
}

/**
 * `source` is a local folder when one exists at that path, else a hub id `org/name` (or `name`),
 * resolved at `options.revision` through the HF cache.
 */
export async function openRepo(source: string, options: RepoOptions = {}): Promise<RepoFiles> {
  if (typeof source !== 'string' || source.length === 0) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected a local folder or a hub id "org/name" for the model source but received ${JSON.stringify(source)}`);
  }
  // a misspelt or snake_case option (local_files_only) is an error, not silently ignored
  const opts = checkKnownOptions<RepoOptions>('openRepo options', options, REPO_OPTION_NAMES);
  // checked for a folder too: a wrong option is an error whatever the source
  const revision = checkRevision(opts.revision ?? 'main');
  const cacheDir = checkString('options.cacheDir', opts.cacheDir);
  // a token is never printed, even a wrong one
  if (opts.token !== undefined && (typeof opts.token !== 'string' || opts.token.length === 0)) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected a non-empty string for options.token but received a value of type ${typeof opts.token}`);
  }
  const token = opts.token;
  const hubUrl = checkString('options.hubUrl', opts.hubUrl);
  if (opts.localFilesOnly !== undefined && typeof opts.localFilesOnly !== 'boolean') {
    throw invalidParameter('options.localFilesOnly', 'boolean', opts.localFilesOnly);
  }
  if (opts.onProgress !== undefined && typeof opts.onProgress !== 'function') {
    throw invalidParameter('options.onProgress', 'function', opts.onProgress);
  }
  if (existsSync(source)) return new LocalRepoFiles(source);
  if (!isHubRepoId(source)) {
    throw new DTorchError(ErrorCode.InvalidArgument,
      `${JSON.stringify(source)} is neither a folder on this machine nor a hub id: a hub id is "name" or "org/name" ` +
      "of letters, digits, '-', '_' and '.' (at most 96 each, no '--' or '..'); give an existing folder or a hub id");
  }
  const env = readHubEnv();
  const url = (hubUrl ?? env.hubUrl).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url)) throw invalidParameter('options.hubUrl (or HF_ENDPOINT)', 'http(s) URL', url);

  return HubRepoFiles.open(source, revision, {
    cacheDir: resolve(cacheDir ?? env.cacheDir),
    hubUrl: url,
    token: token ?? env.token,
    offline: opts.localFilesOnly === true || env.offline,
    offlineReason: opts.localFilesOnly === true ? 'localFilesOnly: true' : 'HF_HUB_OFFLINE=1',
    progress: progressSink(opts.onProgress, env.progressBarsDisabled),
  });
}
