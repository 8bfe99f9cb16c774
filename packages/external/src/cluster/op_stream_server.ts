// The main node's end of the op stream (op_stream.ts): a ZeroMQ ROUTER.
import { timingSafeEqual } from 'node:crypto';
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
  shortRoutingId,
  socketSettings,
  subscribe,
  tcpAddress,
  type OpStreamSocketOptions,
  type Outgoing,
} from './op_stream_socket.js';

/** OpStreamServer.listen's options. */
export interface OpStreamServerOptions extends OpStreamSocketOptions {
  /** The address to bind (default 127.0.0.1; 0.0.0.0 or :: for every interface). */
  host?: string;
  /** The port (default 0: a free one, then read `.port`). */
  port?: number;
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

/** A node admitted to the stream, connected once its hello arrives. */
interface Peer {
  node: number;
  key: Buffer;
  routingId?: Buffer;
  /** The next sequence number to send, and to expect. */
  nextSend: bigint;
  nextReceive: bigint;
  /** Messages sent before the hello, in order. */
  early: Outgoing[];
  waiters: Waiter[];
  /** Forgotten, or its connection went away: its messages are dropped. */
  gone: boolean;
}

/**
 * The main node's end of the op stream: a ZeroMQ ROUTER that each admitted worker connects to.
 * `send(node, payload)` is ordered per node and waits in memory until the node's hello arrives.
 */
export class OpStreamServer {
  /** The port it listens on. */
  readonly port: number;
  #socket: zmq.Router;
  #sender: SendQueue;
  #maxBytes: number;
  #nodes = new Map<number, Peer>();
  /** Routing id (hex) to the connected peer. */
  #peers = new Map<string, Peer>();
  /** Routing ids refused (at their first message, or forgotten), and why: nothing from them is ever accepted. */
  #refused = new Map<string, string>();
  #rejectLog = new RejectLog();
  #onMessage = new Set<(node: number, payload: Buffer) => void>();
  #onReject = new Set<(reject: OpStreamReject) => void>();
  #closed = false;

  private constructor(socket: zmq.Router, port: number, maxBytes: number) {
    this.#socket = socket;
    this.port = port;
    this.#maxBytes = maxBytes;
    this.#sender = new SendQueue(socket, (item, err) => this.#sendFailed(item, err));
    void this.#receive();
  }

  /** Binds a ROUTER on host:port (default 127.0.0.1:0, a free port; read `.port`). */
  static async listen(options: OpStreamServerOptions = {}): Promise<OpStreamServer> {
    const o = checkKnownOptions<OpStreamServerOptions>('OpStreamServer.listen options', options, ['host', 'port', ...SOCKET_OPTIONS]);
    const host = checkHost('OpStreamServer.listen', o.host ?? '127.0.0.1');
    const port = checkInteger('OpStreamServer.listen port', o.port ?? 0, 0, 65535);
    const { maxBytes, zmqOptions } = socketSettings('OpStreamServer.listen', o);
    // mandatory: a full peer makes send() wait and a vanished one fails it, where a ROUTER drops silently by default
    const socket = new zmq.Router({ ...zmqOptions, mandatory: true, ipv6: host.includes(':') });
    try {
      await socket.bind(tcpAddress(host, port));
    } catch (err) {
      socket.close();
      throw new DTorchError(ErrorCode.Network, `OpStreamServer.listen: cannot bind ${host}:${port} (${(err as Error).message})`);
    }
    const bound = Number(/:(\d+)$/.exec(socket.lastEndpoint ?? '')?.[1]);
    return new OpStreamServer(socket, bound, maxBytes);
  }

  /**
   * Lets `node` in: the first peer whose hello carries `key` (32 bytes) becomes that node. Call it
   * before the worker is given the key; admitting a node again replaces its key until it connects.
   */
  admit(node: number, key: Uint8Array): void {
    this.#open('admit');
    checkInteger('OpStreamServer.admit node', node, 0);
    if (!(key instanceof Uint8Array) || key.length !== OP_STREAM_KEY_BYTES) throw invalidParameter('OpStreamServer.admit key', `${OP_STREAM_KEY_BYTES}-byte Buffer`, key);
    const known = this.#nodes.get(node);
    if (known?.routingId) throw new DTorchError(ErrorCode.InvalidArgument, `OpStreamServer.admit: node ${node} is connected already; forget() it first`);
    if (known) return void (known.key = Buffer.from(key));
    this.#nodes.set(node, { node, key: Buffer.from(key), nextSend: 1n, nextReceive: 2n, early: [], waiters: [], gone: false });
  }

  /** Resolves once `node`'s hello has arrived (at once if it has); rejects if it is forgotten or the server closes first. */
  connected(node: number): Promise<void> {
    const peer = this.#peer('connected', node);
    if (peer.routingId) return Promise.resolve();
    return new Promise((resolve, reject) => peer.waiters.push({ resolve, reject }));
  }

  /**
   * Sends `payload` (one Buffer, or several that form it) to `node`, after everything sent to it
   * before; held until the node's hello arrives. Resolves true once ZeroMQ has taken it, false if it
   * was dropped (the node was forgotten or went away, or the server closed); never rejects. Do not
   * change the buffers until it resolves.
   */
  send(node: number, payload: Buffer | readonly Buffer[]): Promise<boolean> {
    const peer = this.#peer('send', node);
    const parts = payloadParts('OpStreamServer.send', payload, this.#maxBytes);
    if (peer.gone) return Promise.resolve(false);
    const frames = encodeFrame(MessageType.Segment, peer.nextSend++, parts);
    return new Promise((done) => {
      const live = () => !peer.gone;
      if (peer.routingId) this.#sender.push({ frames: [peer.routingId, ...frames], live, done });
      else peer.early.push({ frames, live, done });
    });
  }

  /** Hears each reply, in order per node. Returns a function that stops listening. */
  onMessage(listener: (node: number, payload: Buffer) => void): () => void {
    return subscribe(this.#onMessage, listener, 'OpStreamServer.onMessage listener');
  }

  /** Hears each dropped message, with the reason (and the node once known). Returns a function that stops listening. */
  onReject(listener: (reject: OpStreamReject) => void): () => void {
    return subscribe(this.#onReject, listener, 'OpStreamServer.onReject listener');
  }

  /** Ends `node`'s part: its key no longer admits, its unsent messages are dropped, later messages from its peer refused. */
  forget(node: number): void {
    const peer = this.#nodes.get(node);
    if (!peer) return;
    this.#nodes.delete(node);
    this.#drop(peer, `OpStreamServer: node ${node} was forgotten`);
    if (peer.routingId) {
      const id = peer.routingId.toString('hex');
      this.#peers.delete(id);
      this.#refuse(id, `its node (${node}) was forgotten`);
    }
  }

  /** Closes the socket at once (linger 0: what ZeroMQ still queues is dropped); safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const peer of this.#nodes.values()) this.#drop(peer, 'OpStreamServer: the server was closed');
    this.#nodes.clear();
    this.#peers.clear();
    this.#sender.close();
    this.#socket.close();
  }

  #open(what: string): void {
    if (this.#closed) throw new DTorchError(ErrorCode.InvalidArgument, `OpStreamServer.${what}: the server was closed`);
  }

  #peer(what: string, node: number): Peer {
    this.#open(what);
    const peer = this.#nodes.get(node);
    if (!peer) throw new DTorchError(ErrorCode.InvalidArgument, `OpStreamServer.${what}: node ${node} was not admitted`);
    return peer;
  }

  #drop(peer: Peer, why: string): void {
    peer.gone = true;
    for (const item of peer.early.splice(0)) item.done(false);
    for (const waiter of peer.waiters.splice(0)) waiter.reject(new DTorchError(ErrorCode.Network, why));
  }

  #refuse(id: string, why: string): void {
    if (this.#refused.size >= 4096) this.#refused.delete(this.#refused.keys().next().value!);
    this.#refused.set(id, why);
  }

  #sendFailed(item: Outgoing, err: Error): void {
    const id = item.frames[0]!.toString('hex');
    const peer = this.#peers.get(id);
    if (!peer || peer.gone) return;
    // EHOSTUNREACH: the connection is gone (the peer closed, or ZeroMQ cut it); a new one would be a new peer
    log.warn(`op stream: node ${peer.node} is unreachable (${(err as { code?: string }).code ?? err.message}); its messages are dropped`);
    this.#drop(peer, `OpStreamServer: node ${peer.node} is unreachable`);
  }

  async #receive(): Promise<void> {
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await this.#socket.receive();
      } catch (err) {
        if (!this.#closed) log.error(`op stream: the server stopped receiving: ${(err as Error).message}`);
        return;
      }
      const [routingId, ...message] = frames;
      if (routingId) this.#accept(routingId, message);
    }
  }

  #accept(routingId: Buffer, message: Buffer[]): void {
    const id = routingId.toString('hex');
    const peer = this.#peers.get(id);
    if (!peer) return this.#hello(routingId, id, message);
    const decoded = decodeFrame(message, [MessageType.Reply], this.#maxBytes);
    if (!decoded.ok) return this.#reject(`node ${peer.node}`, { kind: decoded.kind, message: decoded.message, node: peer.node });
    const { sequence, payload } = decoded.frame;
    if (sequence !== peer.nextReceive) return this.#reject(`node ${peer.node}`, { kind: 'sequence', message: sequenceMessage(sequence, peer.nextReceive), node: peer.node });
    peer.nextReceive++;
    callEach(this.#onMessage, 'onMessage', peer.node, payload);
  }

  #hello(routingId: Buffer, id: string, message: Buffer[]): void {
    const who = `an unadmitted peer (routing id ${shortRoutingId(routingId)})`;
    const refused = this.#refused.get(id);
    if (refused) return this.#reject(who, { kind: 'unadmitted', message: refused });
    const refuse = (why: string) => {
      this.#refuse(id, 'its first message was refused');
      this.#reject(who, { kind: 'unadmitted', message: `${why}; nothing more from it is accepted` });
    };
    const decoded = decodeFrame(message, [MessageType.Hello], OP_STREAM_KEY_BYTES);
    if (!decoded.ok) return refuse(`its first message is not a hello (${decoded.message})`);
    const { sequence, payload } = decoded.frame;
    if (sequence !== 1n || payload.length !== OP_STREAM_KEY_BYTES) return refuse('a malformed hello');
    let match: Peer | undefined;
    for (const candidate of this.#nodes.values()) if (timingSafeEqual(candidate.key, payload)) match = candidate; // every key, in the same time
    if (!match) return refuse('its hello carries no admitted key');
    if (match.routingId) return refuse(`its hello names node ${match.node}, which is connected already`);
    match.routingId = routingId;
    this.#peers.set(id, match);
    log.debug(`op stream: node ${match.node} connected`);
    for (const item of match.early.splice(0)) this.#sender.push({ ...item, frames: [routingId, ...item.frames] });
    for (const waiter of match.waiters.splice(0)) waiter.resolve();
  }

  #reject(peer: string, reject: OpStreamReject): void {
    // every unadmitted peer shares one budget: a flood of new connections is one source
    this.#rejectLog.write(peer, reject, reject.node === undefined ? 'unadmitted peers' : peer);
    callEach(this.#onReject, 'onReject', reject);
  }
}
