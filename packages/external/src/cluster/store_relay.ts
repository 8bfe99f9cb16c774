// The rendezvous store's calls on the control plane (control.proto's StoreRequest and
// StoreReply): a worker's relayed store (RendezvousStore.relay) hands each call to its session as
// a StoreRequest; the main node runs it on its store (RendezvousStore.answer) and answers with a
// StoreReply of the same id. This file maps the two between the wire and the store's shapes.
import type { StoreOp, StoreReply, StoreRequest } from './rendezvous_store.js';

/** A StoreRequest as the wire carries it (proto-loader's shape). */
export interface StoreRequestMessage {
  /** The worker's number for the call (1, 2, ...); its StoreReply carries it back. */
  id: number;
  /** The op, as control.proto's StoreOp names it (STORE_OP_SET, ...). */
  op: string;
  /** The keys. */
  keys: string[];
  /** set: the value; compareSet: the new value. */
  value: Uint8Array;
  /** compareSet: the value the key must have now. */
  expected: Uint8Array;
  /** add: the amount. */
  delta: number;
  /** get and wait: how long the keys may take to be set, in ms. */
  timeoutMs: number;
}

/** A StoreReply as the wire carries it (proto-loader's shape). */
export interface StoreReplyMessage {
  /** The StoreRequest's id. */
  id: number;
  /** Empty when done; else a DTorch error code. */
  errorCode: string;
  /** What went wrong. */
  errorMessage: string;
  /** get and compareSet: the value. */
  value: Uint8Array;
  /** add: the new value; numKeys: the count; check and deleteKey: 1 or 0. */
  number: number;
}

/** A StoreRequest message read: the call and its number, or what is wrong with it. */
export type ReadStoreRequest =
  | {
      /** The call's number. */
      id: number;
      /** The call. */
      request: StoreRequest;
    }
  | {
      /** What is wrong with the message, for the refusal. */
      problem: string;
    };

/** A StoreReply message read. */
export interface ReadStoreReply {
  /** The number of the call it answers. */
  id: number;
  /** The answer. */
  reply: StoreReply;
}

const wireOps: Record<StoreOp, string> = {
  set: 'STORE_OP_SET',
  get: 'STORE_OP_GET',
  add: 'STORE_OP_ADD',
  check: 'STORE_OP_CHECK',
  wait: 'STORE_OP_WAIT',
  deleteKey: 'STORE_OP_DELETE_KEY',
  numKeys: 'STORE_OP_NUM_KEYS',
  compareSet: 'STORE_OP_COMPARE_SET',
};
const opsOfWire = new Map(Object.entries(wireOps).map(([op, wire]) => [wire, op as StoreOp]));
const empty = new Uint8Array(0);

/** The StoreRequest message of call `id`. */
export function storeRequestMessage(id: number, request: StoreRequest): StoreRequestMessage {
  return { id, op: wireOps[request.op], keys: request.keys, value: request.value, expected: request.expected, delta: request.delta, timeoutMs: request.timeoutMs };
}

/**
 * The call a StoreRequest message carries, or what is wrong with it (the store checks the rest:
 * how many keys the op takes, their sizes, the timeout).
 */
export function storeRequestOf(message: StoreRequestMessage): ReadStoreRequest {
  const op = opsOfWire.get(message.op);
  if (!Number.isSafeInteger(message.id) || message.id < 1) return { problem: `a store request numbered ${String(message.id).slice(0, 24)} (1, 2, ...)` };
  if (op === undefined) return { problem: `a store request of op ${JSON.stringify(String(message.op).slice(0, 40))}` };
  const request: StoreRequest = {
    op,
    keys: Array.isArray(message.keys) ? message.keys : [],
    value: message.value ?? empty,
    expected: message.expected ?? empty,
    delta: Number.isSafeInteger(message.delta) ? message.delta : 0,
    timeoutMs: Number.isSafeInteger(message.timeoutMs) ? message.timeoutMs : 0,
  };
  return { id: message.id, request };
}

/** The StoreReply message answering call `id`. */
export function storeReplyMessage(id: number, reply: StoreReply): StoreReplyMessage {
  return { id, errorCode: reply.errorCode, errorMessage: reply.errorMessage, value: reply.value, number: reply.number };
}

/** The answer a StoreReply message carries. */
export function storeReplyOf(message: StoreReplyMessage): ReadStoreReply {
  return {
    id: Number(message.id),
    reply: { errorCode: message.errorCode ?? '', errorMessage: message.errorMessage ?? '', value: message.value ?? empty, number: Number(message.number ?? 0) },
  };
}
