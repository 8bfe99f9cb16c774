// Helpers of the `dtorch serve` tests: JSON requests with a time bound, an event stream read as
// it comes, and the command run as a child process (its URL read from its first lines).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { main } from './dtorch_command.js';

/** A response's status, headers and JSON body. */
export interface JsonResponse {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** `method url` with a JSON body (or raw text), within `timeoutMs`. */
export async function request(method: string, url: string, body?: unknown, headers: Record<string, string> = {}, timeoutMs = 120_000): Promise<JsonResponse> {
  const raw = typeof body === 'string' || body instanceof Uint8Array;
  const res = await fetch(url, {
    method,
    headers: { ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
    ...(body !== undefined && { body: raw ? (body as string) : JSON.stringify(body) }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

/** One server-sent event, its data parsed. */
export interface Event {
  event: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Reads the event stream at `url` until it ends, calling `onEvent` as each arrives; within `timeoutMs`. */
export async function readEvents(url: string, onEvent: (e: Event) => void = () => {}, headers: Record<string, string> = {}, timeoutMs = 120_000): Promise<Event[]> {
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200 || !res.body) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  const events: Event[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event === undefined || data === undefined) continue; // a heartbeat
      const e = { event, data: JSON.parse(data) };
      events.push(e);
      onEvent(e);
    }
  }
  return events;
}

/** `dtorch serve` as a child process. */
export interface ServeChild {
  child: ChildProcess;
  url: string;
  /** Everything it printed. */
  output(): string;
  /** Resolves with its exit code (null when killed by a signal), within `timeoutMs`. */
  exited(timeoutMs?: number): Promise<number | null>;
}

/** Starts `dtorch serve args` (port 0, offline, HF_HOME under `work`); resolves once it listens. */
export function startServe(work: string, args: string[], timeoutMs = 180_000): Promise<ServeChild> {
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HOME: join(work, 'hf-home'), HF_HUB_OFFLINE: '1' };
  delete env['DTORCH_LOG'];
  const child = spawn(process.execPath, [main, 'serve', '--port', '0', '--log-level', 'warn', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const handle: ServeChild = {
    child,
    url: '',
    output: () => out,
    exited: (ms = 120_000) =>
      Promise.race([exit, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`dtorch serve did not exit within ${ms} ms:\n${out}`)), ms).unref())]),
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`dtorch serve did not start within ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = / at (http:\/\/\S+) \(the page/.exec(out);
      if (match) {
        clearTimeout(timer);
        (handle as { url: string }).url = match[1]!;
        resolve(handle);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    void exit.then((code) => {
      clearTimeout(timer);
      reject(new Error(`dtorch serve exited (${code}) before listening:\n${out}`));
    });
  });
}
