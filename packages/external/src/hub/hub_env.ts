// The HuggingFace settings read from the environment, in one place, with Python huggingface_hub's
// names, defaults and precedence (huggingface_hub/constants.py). Read on each openRepo, not once
// at import, so that a program (or a test) may set them before it opens a repository.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const DEFAULT_HUB_URL = 'https://huggingface.co';

export interface HubEnv {
  /** HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub (HF_HOME: else XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface). */
  cacheDir: string;
  /** HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1/ON/YES/TRUE. */
  offline: boolean;
  /** HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), else the token file `hf auth login` writes (HF_TOKEN_PATH, else HF_HOME/token). */
  token: string | undefined;
  /** HF_ENDPOINT (trailing '/' dropped), else https://huggingface.co. */
  hubUrl: string;
  /** HF_HUB_DISABLE_PROGRESS_BARS is 1/ON/YES/TRUE. */
  progressBarsDisabled: boolean;
}

const isTrue = (value: string | undefined) => value !== undefined && ['1', 'ON', 'YES', 'TRUE'].includes(value.toUpperCase());
const expandUser = (path: string) => (path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : path);
const nonEmpty = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);

export function readHubEnv(env: NodeJS.ProcessEnv = process.env): HubEnv {
  const hfHome = expandUser(nonEmpty(env['HF_HOME']) ?? join(nonEmpty(env['XDG_CACHE_HOME']) ?? join(homedir(), '.cache'), 'huggingface'));
  const cacheDir = expandUser(nonEmpty(env['HF_HUB_CACHE']) ?? nonEmpty(env['HUGGINGFACE_HUB_CACHE']) ?? join(hfHome, 'hub'));
  const tokenPath = expandUser(nonEmpty(env['HF_TOKEN_PATH']) ?? join(hfHome, 'token'));
  return {
    cacheDir,
    offline: isTrue(nonEmpty(env['HF_HUB_OFFLINE']) ?? env['TRANSFORMERS_OFFLINE']),
    token: nonEmpty((nonEmpty(env['HF_TOKEN']) ?? env['HUGGING_FACE_HUB_TOKEN'])?.trim()) ?? readTokenFile(tokenPath),
    hubUrl: (nonEmpty(env['HF_ENDPOINT']) ?? DEFAULT_HUB_URL).replace(/\/+$/, ''),
    progressBarsDisabled: isTrue(env['HF_HUB_DISABLE_PROGRESS_BARS']),
  };
}

function readTokenFile(path: string): string | undefined {
  if (!existsSync(path)) return undefined;
  try {
    return nonEmpty(readFileSync(path, 'utf8').trim());
  } catch {
    return undefined; // unreadable: as if absent (the hub then says whether a token is needed)
  }
}

/** The HF cache folder that openRepo uses when no cacheDir is given. */
export function defaultHubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return readHubEnv(env).cacheDir;
}
