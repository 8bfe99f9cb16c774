// The control plane's gRPC service, from proto/dtorch/control/v1/control.proto through
// @grpc/proto-loader (the .proto is the one source of the messages; no generated code to keep in
// step). The node logic (the main node, the worker) is @dtorch/core's; this file only knows the
// wire: the service, the messages' TypeScript shapes and the token check.
import { createHash, timingSafeEqual } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { StoreReplyMessage, StoreRequestMessage } from './store_relay.js';

/** The revision of control.proto this build speaks (Join.protocol): 2, the rendezvous store over the session. */
export const CONTROL_PROTOCOL = 2;

/** The call metadata key that carries the cluster's token (checked before any message is read). */
export const TOKEN_METADATA = 'dtorch-token';

/** A device a worker offers: `cpu:N` or `cuda:N` on its host. */
export interface ControlDevice {
  /** "cpu" or "cuda". */
  kind: string;
  /** The worker's local index. */
  index: number;
  /** The GPU's name; empty for CPU devices. */
  name: string;
  /** Bytes of memory; 0 for CPU devices. */
  totalMemory: number;
}

/** The worker's first message. */
export interface JoinMessage {
  /** The revision of control.proto the worker speaks. */
  protocol: number;
  /** The worker's host name. */
  hostname: string;
  /** The worker's process id. */
  pid: number;
  /** The worker's DTorch version. */
  dtorchVersion: string;
  /** The LibTorch the worker's addon runs on. */
  libtorchVersion: string;
  /** The devices it offers (at least one). */
  devices: ControlDevice[];
}

/** What a worker sends: exactly one of the fields. */
export interface WorkerMessage {
  /** The first message: who the worker is. */
  join?: JoinMessage | null;
  /** Sent every Welcome.heartbeatMs. */
  heartbeat?: {
    /** 1, 2, 3, ... within the session. */
    sequence: number;
  } | null;
  /** The answer to a Barrier. */
  arrived?: {
    /** The Barrier's number. */
    barrier: number;
  } | null;
  /** A call of the worker's process groups on the cluster's rendezvous store (after Welcome). */
  storeRequest?: StoreRequestMessage | null;
  /** Which field is set (proto-loader's `oneofs`). */
  body?: 'join' | 'heartbeat' | 'arrived' | 'storeRequest';
}

/** What the main node sends: exactly one of the fields. */
export interface MainMessage {
  /** The answer to Join. */
  welcome?: {
    /** The worker's node number: 1, 2, ... in join order (the main program is node 0). */
    node: number;
    /** The cluster-wide index of the worker's first device. */
    firstDevice: number;
    /** How often the worker must send a Heartbeat, in ms. */
    heartbeatMs: number;
    /** The port of the op stream (OpStreamServer) on the main node's host; 0 or absent: none yet. */
    opStreamPort?: number;
    /** The worker's op stream session key (32 bytes; empty or absent: none yet). Never printed. */
    opStreamKey?: Uint8Array;
  } | null;
  /** The program waits for every node: answer with Arrived once all that came before is done. */
  barrier?: {
    /** 1, 2, ... numbered by the main node. */
    barrier: number;
  } | null;
  /** The cluster ends. */
  shutdown?: {
    /** Why, in words, for the worker's last line. */
    reason: string;
  } | null;
  /** The answer to a StoreRequest. */
  storeReply?: StoreReplyMessage | null;
  /** Which field is set (proto-loader's `oneofs`). */
  body?: 'welcome' | 'barrier' | 'shutdown' | 'storeReply';
}

const protoPath = fileURLToPath(new URL('../../proto/dtorch/control/v1/control.proto', import.meta.url));
let loaded: grpc.GrpcObject | undefined;

function control(): grpc.ServiceClientConstructor {
  loaded ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(protoPath, { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true }),
  );
  const v1 = ((loaded['dtorch'] as grpc.GrpcObject)['control'] as grpc.GrpcObject)['v1'] as grpc.GrpcObject;
  return v1['Control'] as grpc.ServiceClientConstructor;
}

/**
 * The Control service's definition, for grpc.Server.addService. `onMalformed` hears of each
 * message that does not decode (gRPC then ends that call with INTERNAL; the server goes on).
 */
export function controlServiceDefinition(onMalformed: (err: Error) => void = () => undefined): grpc.ServiceDefinition {
  const session = control().service['Session']!;
  const decode = session.requestDeserialize;
  const requestDeserialize = (bytes: Buffer) => {
    try {
      return decode(bytes);
    } catch (err) {
      onMalformed(err as Error);
      throw err;
    }
  };
  return { Session: { ...session, requestDeserialize } };
}

/** Encodes a WorkerMessage as the wire carries it (for tests that send raw bytes). */
export function encodeWorkerMessage(message: WorkerMessage): Buffer {
  return control().service['Session']!.requestSerialize(message);
}

/** A client of the Control service at `address` (host:port), without TLS (a cluster's own network). */
export function controlClient(address: string, options: grpc.ChannelOptions = {}): grpc.Client & {
  /** Opens the worker's session; `metadata` carries the token (TOKEN_METADATA). */
  Session(metadata: grpc.Metadata): grpc.ClientDuplexStream<WorkerMessage, MainMessage>;
} {
  const Client = control();
  return new Client(address, grpc.credentials.createInsecure(), options) as never;
}

/** Whether two tokens are equal, in time that does not depend on where they differ (nor on their lengths). */
export function tokensEqual(given: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

export { grpc };
