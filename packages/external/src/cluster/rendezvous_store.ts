// The cluster's rendezvous store (native/external/torch/rendezvous_store.h): LibTorch's c10d
// TCPStore, the key-value service c10d process groups (Gloo, NCCL) meet through. The main node
// serves it and the control plane's Welcome names its port; a call that waits (connect, get) runs
// off the JS thread and rejects with TIMEOUT or NETWORK_ERROR after the store's timeout.
import { DTorchError, ErrorCode, native } from '@dtorch/common';

interface StoreSlice {
  storeServe(host: string, port: number, timeoutMs: number): number;
  storeConnect(host: string, port: number, timeoutMs: number): Promise<number>;
  storePort(handle: number): number;
  storeSet(handle: number, key: string, value: Uint8Array): Promise<void>;
  storeGet(handle: number, key: string): Promise<Buffer>;
  storeAdd(handle: number, key: string, delta: number): Promise<number>;
  storeClose(handle: number): void;
}

const slice = () => native()['external'] as StoreSlice;

function checkEndpoint(what: string, host: string, port: number, timeoutMs: number): void {
  if (typeof host !== 'string' || host === '') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: expected a host name or address, got ${JSON.stringify(host)}`);
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: expected a port from 0 to 65535, got ${port}`);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: expected a timeout of at least 1 ms, got ${timeoutMs}`);
}

/** A c10d TCPStore, served here or reached over the network. */
export class RendezvousStore {
  #handle: number | undefined;

  private constructor(handle: number) {
    this.#handle = handle;
  }

  /** Serves a store on host:port (port 0: a free one); `timeoutMs` bounds each get. */
  static serve(host: string, port = 0, timeoutMs = 30_000): RendezvousStore {
    checkEndpoint('RendezvousStore.serve', host, port, timeoutMs);
    return new RendezvousStore(slice().storeServe(host, port, timeoutMs));
  }

  /** Connects to the store at host:port, trying for up to `timeoutMs` (which then bounds each get). */
  static async connect(host: string, port: number, timeoutMs = 30_000): Promise<RendezvousStore> {
    checkEndpoint('RendezvousStore.connect', host, port, timeoutMs);
    return new RendezvousStore(await slice().storeConnect(host, port, timeoutMs));
  }

  #open(what: string): number {
    if (this.#handle === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `RendezvousStore.${what}: the store was closed`);
    return this.#handle;
  }

  /** The port the store listens on (the server's, also when reached as a client). */
  get port(): number {
    return slice().storePort(this.#open('port'));
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

  /** The native handle (the engine takes it to meet c10d process groups here); INVALID_ARGUMENT once closed. */
  get handle(): number {
    return this.#open('handle');
  }

  /** Closes this end (a served store stops once no call still holds it); safe to call twice. */
  close(): void {
    if (this.#handle !== undefined) slice().storeClose(this.#handle);
    this.#handle = undefined;
  }
}
