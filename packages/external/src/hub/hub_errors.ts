// The hub's failures as DTorchErrors naming the repository, the revision and the file, with the
// fix. @huggingface/hub throws its own HubApiError (status, URL, the hub's JSON message), plain
// Errors ("cannot get path info for x"), fetch's TypeError with the socket error as cause, or the
// file system's errors while it writes the cache; the fetch wrapper has kept the hub's X-Error-Code
// beside them. The token is never in a message.
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { HubCall } from './hub_fetch.js';

export interface HubErrorContext {
  repoId: string;
  revision: string;
  /** The repository file being fetched; none while resolving the revision. */
  file?: string;
  hubUrl: string;
  /** Whether a token was sent. */
  withToken: boolean;
  call: HubCall;
  /** A sentence for a network failure when the cache already holds this revision. */
  cachedHint?: string;
}

const TOKEN_FIX = 'set HF_TOKEN or pass options.token';

/** Removes `secret` from `text` wherever it occurs (a last guard: messages are built without it). */
export function redact(text: string, secret: string | undefined): string {
  return secret ? text.split(secret).join('***') : text;
}

// The hub's own words for a failure, when it sent some (HubApiError.data.error).
function hubWords(err: unknown, call: HubCall): string | undefined {
  const data = (err as { data?: { error?: unknown; message?: unknown } } | null)?.data;
  const text = typeof data?.error === 'string' ? data.error : typeof data?.message === 'string' ? data.message : call.failure?.errorMessage;
  return text && text.length > 0 ? text.slice(0, 300) : undefined;
}

// The socket-level reason of a failed fetch (ECONNREFUSED, ENOTFOUND, ...), or undefined.
function networkCause(err: unknown): string | undefined {
  if (!(err instanceof TypeError)) return undefined;
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  if (cause && typeof cause.message === 'string') return cause.message;
  return err.message === 'fetch failed' ? 'the connection failed' : undefined;
}

export function hubError(err: unknown, ctx: HubErrorContext, token: string | undefined): DTorchError {
  const made = translate(err, ctx);
  return new DTorchError(made.code, redact(made.message, token));
}

function translate(err: unknown, ctx: HubErrorContext): DTorchError {
  if (err instanceof DTorchError) return err;
  const label = `${ctx.repoId}@${ctx.revision}`;
  const what = ctx.file === undefined ? label : `${label} (file ${ctx.file})`;
  const status = (err as { statusCode?: unknown } | null)?.statusCode ?? ctx.call.failure?.status;
  const code = ctx.call.failure?.errorCode;
  const words = hubWords(err, ctx.call);
  const answered = (s: unknown) => `the hub answered ${String(s)}${words ? `: ${words}` : ''}`;

  if (typeof status === 'number') {
    if (code === 'RepoNotFound') {
      return new DTorchError(ErrorCode.NotFound,
        `${what}: the hub at ${ctx.hubUrl} has no repository ${ctx.repoId} (${answered(status)}); check the name, ` +
        `or if it is private or gated, ${ctx.withToken ? 'check that your token has access to it' : TOKEN_FIX}`);
    }
    if (code === 'RevisionNotFound') {
      return new DTorchError(ErrorCode.NotFound,
        `${ctx.repoId} has no revision ${ctx.revision} (${answered(status)}); give a branch, tag or commit hash that exists`);
    }
    if (status === 404) {
      const subject = ctx.file === undefined ? `${label} was not found` : `${label} has no file ${ctx.file}`;
      return new DTorchError(ErrorCode.NotFound, `${subject} (${answered(404)}); check the path and the revision`);
    }
    if (status === 401 || status === 403) {
      const subject = ctx.file === undefined ? `the repository ${ctx.repoId}` : `${ctx.file} of ${label}`;
      const fix = ctx.withToken
        ? 'the token sent was refused or has no access: check it, and accept the repository\'s conditions'
        : `a token is needed: ${TOKEN_FIX}, after accepting the repository's conditions`;
      return new DTorchError(ErrorCode.AccessDenied,
        `the hub refused access to ${subject} (${answered(status)}); it is gated or private, ${fix} at ${ctx.hubUrl}/${ctx.repoId}`);
    }
    return new DTorchError(ErrorCode.Network, `the hub at ${ctx.hubUrl} failed for ${what} (${answered(status)}); try again later`);
  }

  // the cache folder could not be written (permissions, a full disk)
  const fsError = err as { syscall?: unknown; code?: unknown; path?: unknown } | null;
  if (!(err instanceof TypeError) && typeof fsError?.syscall === 'string' && typeof fsError.code === 'string') {
    return new DTorchError(ErrorCode.BadFile,
      `could not write ${what} into the HF cache (${fsError.code} on ${fsError.syscall}${typeof fsError.path === 'string' ? ` ${fsError.path}` : ''}); ` +
      'check the folder\'s permissions and free space, or give another cacheDir');
  }

  const cause = networkCause(err);
  if (cause !== undefined) {
    return new DTorchError(ErrorCode.Network,
      `could not reach the hub at ${ctx.hubUrl} for ${what} (${cause}); check the connection or HF_ENDPOINT` +
      (ctx.cachedHint ? `. ${ctx.cachedHint}` : ''));
  }

  const message = err instanceof Error ? err.message : String(err);
  // @huggingface/hub's words when paths-info lists nothing for the path
  if (ctx.file !== undefined && message.startsWith('cannot get path info')) {
    return new DTorchError(ErrorCode.NotFound, `${label} has no file ${ctx.file} (the hub has no information on that path); check the path and the revision`);
  }
  return new DTorchError(ErrorCode.Network, `the hub at ${ctx.hubUrl} gave an unexpected answer for ${what}: ${message}`);
}
