// Who may use the service: loopback needs no token unless one is set; any other address needs
// one (checkServeOptions). The bearer token is compared in constant time: both sides hashed to 32
// bytes first, so that neither the length nor the first differing byte shows in the timing.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** True for 127.0.0.0/8, ::1, ::ffff:127.x and localhost: only this host can connect. */
export function isLoopback(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^::ffff:127\./.test(h) || h === '0:0:0:0:0:0:0:1';
  return false;
}

/** The token in `file`'s first line; throws BAD_FILE when it cannot be read or is empty. */
export function readTokenFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new DTorchError(ErrorCode.BadFile, `serve: --token-file ${file} cannot be read (${(err as Error).message})`);
  }
  const token = text.split(/\r?\n/, 1)[0]!.trim();
  if (token === '') throw new DTorchError(ErrorCode.BadFile, `serve: --token-file ${file}: its first line is empty; write the token there (e.g. openssl rand -hex 32 > ${file})`);
  return token;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Whether `given` equals `expected`, in time that does not depend on where they differ. */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** Whether an Authorization header carries `token` as a Bearer token. */
export function authorized(header: string | undefined, token: string): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  // a missing header is compared too, so that its answer takes as long as a wrong one's
  return tokenMatches(match?.[1] ?? '', token) && match !== null;
}
