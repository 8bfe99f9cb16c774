// The cluster's rendezvous store (native/external/torch/rendezvous_store.h): the c10d key-value
// store that c10d process groups (Gloo, NCCL) meet through. It lives in the main node's process
// (`local`) and has no port; a worker reaches it through a relay (`relay`) whose calls the
// control plane carries over the worker's authenticated session, and which the main node runs
// with `answer`. `connect` is a plain c10d TCPStore client (for probing a port). A call that waits
// runs off the JS thread and rejects with TIMEOUT or NETWORK_ERROR after the store's timeout.
import { DTorchError, ErrorCode, native } from '@dtorch/common';

/** A c10d store call, by name (control.proto's StoreOp). */
export type StoreOp = 'set' | 'get' | 'add' | 'check' | 'wait' | 'deleteKey' | 'numKeys' | 'compareSet';

/** One call of a relayed store, on its way to the process that holds the store. */
export interface StoreRequest {
  /** What to do. */
  op: StoreOp;
  /** One key for every op but check and wait (one or more) and numKeys (none). */
  keys: string[];
  /** set: the value; compareSet: the new value (empty otherwise). */
  value: Uint8Array;
  /** compareSet: the value the key must have now (empty: unset). */
  expected: Uint8Array;
  /** add: the amount. */
  delta: number;
  /** get and wait: how long the keys may take to be set, in ms. */
  timeoutMs: number;
}

/** The answer to a StoreRequest. */
export interface StoreReply {
  /** Empty when the call was done; else a DTorch error code (TIMEOUT, INVALID_ARGUMENT, ...). */
  errorCode: string;
  /** What went wrong, when errorCode is set. */
  errorMessage: string;
  /** get and compareSet: the value (empty otherwise). */
  value: Uint8Array;
  /** add: the new value; numKeys: the count; check and deleteKey: 1 or 0. */
  number: number;
}

interface StoreSlice {
  storeLocal(timeoutMs: number): number;
  storeRelay(timeoutMs: number, onRequest: (id: number, request: StoreRequest) => void): number;
  storeRelayReply(handle: number, id: number, reply: StoreReply): void;
  storeAnswer(handle: number, origin: number, request: StoreRequest): Promise<StoreReply>;
  storeForget(handle: number, origin: number): void;
  storeConnect(host: string, port: number, timeoutMs: number): Promise<number>;
  storeSet(handle: number, key: string, value: Uint8Array): Promise<void>;
  storeGet(handle: number, key: string): Promise<Buffer>;
  storeAdd(handle: number, key: string, delta: number): Promise<number>;
  storeCheck(handle: number, keys: string[]): Promise<boolean>;
  storeClose(handle: number, why: string): void;
}

const slice = () => native()['external'] as StoreSlice;

function checkTimeout(what: string, timeoutMs: number): void {
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: expected a timeout of at least 1 ms, got ${timeoutMs}`);
}

type Kind = 'local' | 'relay' | 'client';

/** A c10d store: the main node's own, a worker's relayed view of it, or a TCPStore client. */
export class RendezvousStore {
  #handle: number | undefined;
  readonly #kind: Kind;

  private constructor(handle: number, kind: Kind) {
    this.#handle = handle;
    this.#kind = kind;
  }

  /** A store in this process (c10d's HashStore), the main node's; `timeoutMs` bounds each get. */
  static local(timeoutMs = 30_000): RendezvousStore {
    checkTimeout('RendezvousStore.local', timeoutMs);
    return new RendezvousStore(slice().storeLocal(timeoutMs), 'local');
  }

  /**
   * A store in another process: each call is handed to `send` (on the JS thread) with a number,
   * and waits until `reply` hands back the answer with that number, `timeoutMs` passes (TIMEOUT;
   * a get or wait: its own timeout, plus a margin) or the store is closed (NETWORK_ERROR at once).
   * If `send` throws, that call fails at once.
   */
  static relay(send: (id: number, request: StoreRequest) => void, timeoutMs = 30_000): RendezvousStore {
    if (typeof send !== 'function') throw new DTorchError(ErrorCode.InvalidArgument, 'RendezvousStore.relay: expected send as a function');
    checkTimeout('RendezvousStore.relay', timeoutMs);
    return new RendezvousStore(slice().storeRelay(timeoutMs, send), 'relay');
  }

  /** A c10d TCPStore client of host:port, trying for up to `timeoutMs` (which then bounds each get). */
  static async connect(host: string, port: number, timeoutMs = 30_000): Promise<RendezvousStore> {
    if (typeof host !== 'string' || host === '') throw new DTorchError(ErrorCode.InvalidArgument, `RendezvousStore.connect: expected a host name or address, got ${JSON.stringify(host)}`);
    if (!Number.isSafeInteger(port) || port < 0 || port > 65535) throw new DTorchError(ErrorCode.InvalidArgument, `RendezvousStore.connect: expected a port from 0 to 65535, got ${port}`);
    checkTimeout('RendezvousStore.connect', timeoutMs);
    return new RendezvousStore(await slice().storeConnect(host, port, timeoutMs), 'client');
  }

  #open(what: string, kind?: Kind): number {
    if (this.#handle === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `RendezvousStore.${what}: the store was closed`);
    if (kind !== undefined && this.#kind !== kind) throw new DTorchError(ErrorCode.InvalidArgument, `RendezvousStore.${what}: only a ${kind} store has it (this one is ${this.#kind})`);
    return this.#handle;
  }

  /** Sets `key` to `value` (a string is stored as its UTF-8 bytes). */
  set(key: string, value: Uint8Array | string): Promise<void> {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
    return slice().storeSet(this.#open('set'), key, bytes);
  }

  /** The value of `key`, waiting until some node sets it (TIMEOUT after the store's timeout). */
  get(key: string): Promise<Buffer> {
    return slice().storeGet(this.#open('get'), key);
  }

  /** Adds `delta` to the counter `key` (0 when unset) and resolves to its new value; add(key, 0) reads it. */
  add(key: string, delta = 1): Promise<number> {
    return slice().storeAdd(this.#open('add'), key, delta);
  }

  /** Whether every key of `keys` is set, without waiting. */
  check(keys: readonly string[]): Promise<boolean> {
    return slice().storeCheck(this.#open('check'), [...keys]);
  }

  /**
   * Runs a relayed call of node `origin` on this local store (off the JS thread: a get or wait
   * waits as the request says, but ends once `origin` is forgotten or the store closed). Resolves
   * to the answer; a malformed or failed call is answered with its error, never a rejection.
   */
  answer(origin: number, request: StoreRequest): Promise<StoreReply> {
    return slice().storeAnswer(this.#open('answer', 'local'), origin, request);
  }

  /** Ends the waits of node `origin`'s relayed calls now, and fails its later ones (its session ended). */
  forget(origin: number): void {
    slice().storeForget(this.#open('forget', 'local'), origin);
  }

  /** Hands a relayed store the answer to its call `id` (one nothing waits for any more is ignored). */
  reply(id: number, reply: StoreReply): void {
    slice().storeRelayReply(this.#open('reply', 'relay'), id, reply);
  }

  /** The native handle (the engine takes it to meet c10d process groups here); INVALID_ARGUMENT once closed. */
  get handle(): number {
    return this.#open('handle');
  }

  /**
   * Closes this end: waiting calls end (a relayed store's fail with NETWORK_ERROR naming `why`),
   * and the store goes once no call still holds it; safe to call twice.
   */
  close(why = 'the store was closed'): void {
    if (this.#handle !== undefined) slice().storeClose(this.#handle, why);
    this.#handle = undefined;
  }
}
