// What both ends of the op stream share (op_stream.ts): the session key, the socket options, the
// queue that feeds a socket one send at a time, and the rejection log.
import { randomBytes } from 'node:crypto';
import { DTorchError, ErrorCode, checkInteger, invalidParameter, log } from '@dtorch/common';
import type * as zmq from 'zeromq';
import { HEADER_BYTES, type OpStreamReject } from './op_stream_frame.js';

/** Bytes in a session key. */
export const OP_STREAM_KEY_BYTES = 32;

/** A new session key: 32 random bytes, for admit() and the worker's Welcome. */
export function newOpStreamKey(): Buffer {
  return randomBytes(OP_STREAM_KEY_BYTES);
}

/** Options both ends take. */
export interface OpStreamSocketOptions {
  /** The largest payload (and ZeroMQ frame) accepted, in bytes (default 1 GiB). */
  maxMessageBytes?: number;
  /** Messages ZeroMQ queues per peer before send() waits (ZMQ_SNDHWM, default 1000; 0: no limit). */
  sendHighWaterMark?: number;
  /** Messages ZeroMQ queues per peer on receipt before it stops reading the socket (ZMQ_RCVHWM, default 1000; 0: no limit). */
  receiveHighWaterMark?: number;
}

/** The option names both ends take. */
export const SOCKET_OPTIONS = ['maxMessageBytes', 'sendHighWaterMark', 'receiveHighWaterMark'] as const;
const DEFAULT_MAX_MESSAGE_BYTES = 2 ** 30;
const DEFAULT_HIGH_WATER_MARK = 1000;

// maxBytes bounds the payload; ZMQ_MAXMSGSIZE bounds each frame (the header's too)
export function socketSettings(what: string, options: OpStreamSocketOptions) {
  const maxBytes = checkInteger(`${what} maxMessageBytes`, options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES, 0, 2 ** 48);
  const zmqOptions = {
    linger: 0,
    maxMessageSize: Math.max(maxBytes, HEADER_BYTES),
    sendHighWaterMark: checkInteger(`${what} sendHighWaterMark`, options.sendHighWaterMark ?? DEFAULT_HIGH_WATER_MARK, 0, 2 ** 31 - 1),
    receiveHighWaterMark: checkInteger(`${what} receiveHighWaterMark`, options.receiveHighWaterMark ?? DEFAULT_HIGH_WATER_MARK, 0, 2 ** 31 - 1),
  };
  return { maxBytes, zmqOptions };
}

export function checkHost(what: string, host: unknown): string {
  if (typeof host !== 'string' || host === '') throw invalidParameter(`${what} host`, 'host name or address', host);
  return host;
}

export function tcpAddress(host: string, port: number): string {
  return host.includes(':') ? `tcp://[${host}]:${port}` : `tcp://${host}:${port}`;
}

export function payloadParts(what: string, payload: Buffer | readonly Buffer[], maxBytes: number): Buffer[] {
  const parts = Buffer.isBuffer(payload) ? [payload] : Array.isArray(payload) && payload.every((p) => Buffer.isBuffer(p)) ? [...payload] : undefined;
  if (parts === undefined) throw invalidParameter(`${what} payload`, 'Buffer or array of Buffers', payload);
  const bytes = parts.reduce((n, p) => n + p.length, 0);
  if (bytes > maxBytes) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a payload of ${bytes} bytes is over maxMessageBytes ${maxBytes}`);
  return parts;
}

/** A message waiting for the socket; `live()` false drops it unsent. */
export interface Outgoing {
  frames: Buffer[];
  live: () => boolean;
  done: (sent: boolean) => void;
}

const FULL_PEER_RETRY_MS = 20;

// zeromq.js allows one send in progress per socket: messages wait here in order, then for the
// socket's own queue (its high-water mark) to take them.
export class SendQueue {
  #items: Outgoing[] = [];
  #head = 0;
  #running = false;
  #closed = false;

  constructor(
    private readonly socket: zmq.Writable,
    private readonly onFailure: (item: Outgoing, err: Error) => void,
  ) {}

  push(item: Outgoing): void {
    if (this.#closed) return item.done(false);
    this.#items.push(item);
    if (!this.#running) void this.#drain();
  }

  async #drain(): Promise<void> {
    this.#running = true;
    while (this.#head < this.#items.length) {
      const item = this.#items[this.#head++]!;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      item.done(await this.#send(item));
    }
    this.#running = false;
  }

  // A ROUTER reads as writable while any peer has room, so a send to a peer whose queue is full
  // fails with EAGAIN instead of waiting (and ZeroMQ gives no signal for one peer): that peer is
  // slow, not gone, so the send is tried again, 1 ms later and then up to every 20 ms.
  async #send(item: Outgoing): Promise<boolean> {
    for (let waitMs = 1; ; waitMs = Math.min(2 * waitMs, FULL_PEER_RETRY_MS)) {
      if (this.#closed || !item.live()) return false;
      try {
        await this.socket.send(item.frames);
        return true;
      } catch (err) {
        if ((err as { code?: string }).code !== 'EAGAIN') {
          if (!this.#closed) this.onFailure(item, err as Error);
          return false;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  close(): void {
    this.#closed = true;
    for (let i = this.#head; i < this.#items.length; i++) this.#items[i]!.done(false);
    this.#items = [];
    this.#head = 0;
  }
}

// Logs each kind of rejection at warn the first time a peer group earns it (a node; every
// unadmitted peer together, since a new connection is a new peer), then at most once a minute
// with how many were seen since, the rest at debug: neither a corrupt stream nor a flood of
// garbage peers can flood the log. Bounded, so a flood of kinds cannot grow it without end.
export class RejectLog {
  #seen = new Map<string, { at: number; since: number }>();
  readonly #intervalMs: number;

  constructor(intervalMs = 60_000) {
    this.#intervalMs = intervalMs;
  }

  /** Logs `reject` from `peer`, rate-limited per `group` (default: the peer itself) and kind. */
  write(peer: string, reject: OpStreamReject, group = peer): void {
    const key = `${group} ${reject.kind}`;
    const now = Date.now();
    const seen = this.#seen.get(key);
    const line = `op stream: dropped a message from ${peer}: ${reject.message}`;
    if (seen && now - seen.at < this.#intervalMs) {
      seen.since++;
      log.debug(line);
      return;
    }
    if (!seen && this.#seen.size >= 4096) this.#seen.clear();
    const more = seen && seen.since > 0 ? ` (and ${seen.since} more like it from ${group} in the last ${Math.round((now - seen.at) / 1000)} s, logged at debug)` : '';
    this.#seen.set(key, { at: now, since: 0 });
    log.warn(line + more);
  }
}

/** A peer-chosen ZeroMQ routing id (up to 255 bytes) as a log shows it: its first 8 bytes in hex, and its length when longer. */
export function shortRoutingId(id: Buffer): string {
  return id.length <= 8 ? id.toString('hex') : `${id.subarray(0, 8).toString('hex')}... (${id.length} bytes)`;
}

export function callEach<A extends unknown[]>(listeners: Set<(...args: A) => void>, what: string, ...args: A): void {
  for (const listener of listeners) {
    try {
      listener(...args);
    } catch (err) {
      log.error(`op stream: an ${what} listener threw: ${(err as Error).message}`);
    }
  }
}

export function subscribe<T>(listeners: Set<T>, listener: T, what: string): () => void {
  if (typeof listener !== 'function') throw invalidParameter(what, 'function', listener);
  listeners.add(listener);
  return () => void listeners.delete(listener);
}

export function sequenceMessage(got: bigint, expected: bigint): string {
  return `sequence number ${got}, expected ${expected} (${got < expected ? 'replayed or duplicated' : 'skipped: a message was lost'})`;
}
