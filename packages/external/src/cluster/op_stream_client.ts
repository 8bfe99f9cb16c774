// A worker's end of the op stream (op_stream.ts): a ZeroMQ DEALER.
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter, log } from '@dtorch/common';
import * as zmq from 'zeromq';
import { MessageType, decodeFrame, encodeFrame, type OpStreamReject } from './op_stream_frame.js';
import {
  OP_STREAM_KEY_BYTES,
  RejectLog,
  SOCKET_OPTIONS,
  SendQueue,
  callEach,
  checkHost,
  payloadParts,
  sequenceMessage,
  socketSettings,
  subscribe,
  tcpAddress,
  type OpStreamSocketOptions,
} from './op_stream_socket.js';

/** OpStreamClient.connect's options. */
export interface OpStreamClientOptions extends OpStreamSocketOptions {
  /** The main node's host. */
  host: string;
  /** The op stream's port (Welcome.op_stream_port). */
  port: number;
  /** This worker's session key (Welcome.op_stream_key). */
  key: Uint8Array;
}

/**
 * A worker's end of the op stream: a ZeroMQ DEALER connected to the main node's OpStreamServer.
 * Its hello (with the key) goes first; segments arrive through onMessage, in order.
 */
export class OpStreamClient {
  #socket: zmq.Dealer;
  #sender: SendQueue;
  #maxBytes: number;
  #nextSend = 1n;
  #nextReceive = 1n;
  #rejectLog = new RejectLog();
  #onMessage = new Set<(payload: Buffer) => void>();
  #onReject = new Set<(reject: OpStreamReject) => void>();
  #closed = false;

  private constructor(socket: zmq.Dealer, key: Buffer, maxBytes: number) {
    this.#socket = socket;
    this.#maxBytes = maxBytes;
    this.#sender = new SendQueue(socket, (_item, err) => log.warn(`op stream: a reply to the main node was dropped (${(err as { code?: string }).code ?? err.message})`));
    this.#push(MessageType.Hello, [key]);
    void this.#receive();
  }

  /**
   * Connects to the main node's op stream at host:port and sends the hello with `key`. Returns at
   * once: ZeroMQ connects (and reconnects) in the background, and what is sent waits meanwhile.
   */
  static connect(options: OpStreamClientOptions): OpStreamClient {
    const o = checkKnownOptions<OpStreamClientOptions>('OpStreamClient.connect options', options, ['host', 'port', 'key', ...SOCKET_OPTIONS]);
    const host = checkHost('OpStreamClient.connect', o.host);
    const port = checkInteger('OpStreamClient.connect port', o.port, 1, 65535);
    if (!(o.key instanceof Uint8Array) || o.key.length !== OP_STREAM_KEY_BYTES) throw invalidParameter('OpStreamClient.connect key', `${OP_STREAM_KEY_BYTES}-byte Buffer`, o.key);
    const { maxBytes, zmqOptions } = socketSettings('OpStreamClient.connect', o);
    const socket = new zmq.Dealer({ ...zmqOptions, ipv6: host.includes(':') });
    socket.connect(tcpAddress(host, port));
    return new OpStreamClient(socket, Buffer.from(o.key), maxBytes);
  }

  /**
   * Sends a reply (one Buffer, or several that form it) after those before. Resolves true once
   * ZeroMQ has taken it, false if the client closed first; never rejects. Do not change the
   * buffers until it resolves.
   */
  send(payload: Buffer | readonly Buffer[]): Promise<boolean> {
    if (this.#closed) throw new DTorchError(ErrorCode.InvalidArgument, 'OpStreamClient.send: the client was closed');
    return this.#push(MessageType.Reply, payloadParts('OpStreamClient.send', payload, this.#maxBytes));
  }

  /** Hears each segment, in order. Returns a function that stops listening. */
  onMessage(listener: (payload: Buffer) => void): () => void {
    return subscribe(this.#onMessage, listener, 'OpStreamClient.onMessage listener');
  }

  /** Hears each dropped message, with the reason. Returns a function that stops listening. */
  onReject(listener: (reject: OpStreamReject) => void): () => void {
    return subscribe(this.#onReject, listener, 'OpStreamClient.onReject listener');
  }

  /** Closes the socket at once (linger 0: unsent replies are dropped); safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#sender.close();
    this.#socket.close();
  }

  #push(type: MessageType, parts: Buffer[]): Promise<boolean> {
    const frames = encodeFrame(type, this.#nextSend++, parts);
    return new Promise((done) => this.#sender.push({ frames, live: () => true, done }));
  }

  async #receive(): Promise<void> {
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await this.#socket.receive();
      } catch (err) {
        if (!this.#closed) log.error(`op stream: the client stopped receiving: ${(err as Error).message}`);
        return;
      }
      this.#accept(frames);
    }
  }

  #accept(frames: Buffer[]): void {
    const decoded = decodeFrame(frames, [MessageType.Segment], this.#maxBytes);
    if (!decoded.ok) return this.#reject({ kind: decoded.kind, message: decoded.message });
    const { sequence, payload } = decoded.frame;
    if (sequence !== this.#nextReceive) return this.#reject({ kind: 'sequence', message: sequenceMessage(sequence, this.#nextReceive) });
    this.#nextReceive++;
    callEach(this.#onMessage, 'onMessage', payload);
  }

  #reject(reject: OpStreamReject): void {
    this.#rejectLog.write('the main node', reject);
    callEach(this.#onReject, 'onReject', reject);
  }
}
