// RepoFiles: the files of a model repository, wherever they come from: a local folder (a
// `save_pretrained` output, transformers or diffusers layout) or a hub repository at a revision,
// resolved through the standard HF cache. The loaders above ask for files by their path inside
// the repository (`text_encoder/config.json`) and get local paths back; only what they ask for
// is ever downloaded.
import { existsSync, lstatSync, readdirSync, readlinkSync, statSync, type Stats } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { DTorchError, ErrorCode } from '@dtorch/common';

/**
 * The files of a model repository, a local folder or a hub repository at a revision, by their
 * path inside it; what `from_pretrained`-style loaders read configs and weights through.
 */
export interface RepoFiles {
  /** What the files come from, for messages: a folder path, or `org/name@revision`. */
  readonly description: string;
  /** The local folder the files lie in (the folder itself, or the cache's snapshot folder). */
  readonly root: string;
  /** Every file path (relative, '/'-separated) the repository holds. */
  list(): readonly string[];
  /** Whether the repository holds a file at `path` (relative, '/'-separated); nothing is downloaded. */
  has(path: string): boolean;
  /**
   * Local paths of `paths`, in order, downloading the ones not in the cache yet. A path the
   * repository lacks is a NOT_FOUND DTorchError naming the repository and the file.
   */
  fetch(paths: readonly string[]): Promise<string[]>;
}

// false for no entry at all; an error for a link whose target is missing (not "no such file")
function brokenLink(path: string): false {
  const link = lstatSync(path, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) throw new DTorchError(ErrorCode.BadFile, `${path} is a symbolic link to ${readlinkSync(path)}, which does not exist`);
  return false;
}

/** Relative paths of every file under `dir`, '/'-separated, sorted. */
export function listFolder(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue; // .git, .cache: never model files
      const full = join(at, entry.name);
      // a snapshot's files are symbolic links into blobs/: follow them (a link that cannot be
      // followed is listed, and has() says what is wrong with it)
      const isDir = entry.isDirectory() || (entry.isSymbolicLink() && linkTarget(full)?.isDirectory());
      if (isDir) walk(full);
      else out.push(relative(dir, full).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

// What the link at `path` leads to; undefined when it leads nowhere (a loop, a missing target)
function linkTarget(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** A repository that is a folder on disk (nothing is ever downloaded). */
export class LocalRepoFiles implements RepoFiles {
  readonly description: string;
  readonly root: string;
  #files: Set<string> | undefined;

  constructor(dir: string) {
    this.root = resolve(dir);
    this.description = this.root;
    if (!existsSync(this.root) || !statSync(this.root).isDirectory()) {
      throw new DTorchError(ErrorCode.NotFound, `${this.root} is not a folder; give a folder written by save_pretrained, or a hub id such as "org/name"`);
    }
  }

  list(): readonly string[] {
    this.#files ??= new Set(listFolder(this.root));
    return [...this.#files];
  }

  has(path: string): boolean {
    const full = join(this.root, path);
    let stats: Stats | undefined;
    try {
      stats = statSync(full, { throwIfNoEntry: false });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP') throw new DTorchError(ErrorCode.BadFile, `${full} is a symbolic link that loops (ELOOP); point it at the file itself`);
      if (code === 'ENOTDIR') return false; // a file where a folder of the path should be
      throw new DTorchError(ErrorCode.BadFile, `${full}: cannot read: ${(err as Error).message}`);
    }
    return stats ? stats.isFile() : brokenLink(full);
  }

  async fetch(paths: readonly string[]): Promise<string[]> {
    return paths.map((path) => {
      if (!this.has(path)) throw new DTorchError(ErrorCode.NotFound, `${this.description} has no file ${path}`);
      return join(this.root, path);
    });
  }
}
