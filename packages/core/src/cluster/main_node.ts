// The main node of a cluster: the gRPC server worker nodes join (packages/external's Control
// service). It checks each worker's token, numbers the nodes and their devices in join order,
// watches their heartbeats, runs barriers, and ends the cluster. It also streams the engine's op
// stream to every worker (ZeroMQ, packages/external's OpStreamServer) and hands their answers
// (read values, syncs) back to the engine, and holds the cluster's rendezvous store, which has no
// port: a worker's store calls come on its authenticated session and are answered there. A node
// that is killed, cut off or silent for `lostAfterMs` is lost: every pending wait that depends on
// it rejects with NODE_LOST naming it, and the onNodeLost listeners hear of it. Every wait has a
// deadline.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DTorchError, ErrorCode, log } from '@dtorch/common';
import {
  CONTROL_PROTOCOL,
  OpStreamServer,
  RendezvousStore,
  TOKEN_METADATA,
  controlServiceDefinition,
  grpc,
  storeReplyMessage,
  storeRequestOf,
  tokensEqual,
  torchInfo,
  type JoinMessage,
  type MainMessage,
  type StoreReply,
  type StoreRequestMessage,
  type WorkerMessage,
} from '@dtorch/external';
import { engine } from '../engine.js';
import type { ClusterDeviceEntry } from '../native_slice.js';

/** How a cluster starts (dt.cluster.start). */
export interface ClusterOptions {
  /** host:port to listen on; default 127.0.0.1:0 (loopback, a free port). A non-loopback host needs a token. */
  listen?: string;
  /** The secret workers must present; required unless `listen` is loopback. */
  token?: string;
  /** How many workers to wait for before start() resolves (default 0). */
  workers?: number;
  /** How long start() waits for them, in ms (default 60000). */
  joinTimeoutMs?: number;
  /** How often workers send a heartbeat, in ms (default 1000). */
  heartbeatMs?: number;
  /** A worker silent this long is lost, in ms (default 3000; at least twice heartbeatMs). */
  lostAfterMs?: number;
  /** Called with the bound host:port as soon as the node listens, before the workers join (to start them on a port 0 chose). */
  onListening?: (address: string) => void;
  /**
   * This process's own devices in the cluster (node 0's), each kind numbered from 0 as on this
   * host: default every GPU of the host and cpu:0. Every device this process already uses must be among them.
   */
  devices?: readonly {
    /** "cpu" or "cuda". */
    kind: 'cpu' | 'cuda';
    /** The device's index on this host. */
    index: number;
  }[];
}

/** A device of the cluster: a node's `cpu:N` or `cuda:N`, with the index a mesh names it by. */
export interface ClusterDevice {
  /** The node that has it (0: the main program; 1, 2, ... the workers in join order). */
  node: number;
  /** 'cpu' or 'cuda'. */
  kind: 'cpu' | 'cuda';
  /** The device on its node, e.g. "cpu:1". */
  device: string;
  /**
   * What a DeviceMesh of its kind names it by: the cluster numbers each kind across the nodes,
   * node 0's devices first (as on its host), then each worker's in join order.
   */
  index: number;
  /** The GPU's name; empty for CPU devices. */
  name: string;
  /** Bytes of memory; 0 for CPU devices. */
  totalMemory: number;
}

/** A worker node as the main node sees it. */
export interface ClusterNode {
  /** 1, 2, ... in join order (the main program is node 0). */
  node: number;
  /** The worker's host name, as it reported it. */
  hostname: string;
  /** The worker's process id, as it reported it. */
  pid: number;
  /** Its address as the main node sees the connection. */
  peer: string;
  /** Its DTorch version. */
  dtorchVersion: string;
  /** The LibTorch its addon runs on. */
  libtorchVersion: string;
  /** The devices it offers. */
  devices: ClusterDevice[];
  /** False once it was lost or the cluster shut down. */
  alive: boolean;
}

interface Session {
  info: ClusterNode;
  call: grpc.ServerDuplexStream<WorkerMessage, MainMessage>;
  lastHeard: number;
  /** It receives the op stream (it has been sent what joining needs). */
  streaming: boolean;
  /** Its rendezvous store calls not answered yet. */
  storeCalls: number;
}

/** How many store calls of one worker may wait at once (its process groups make a few each). */
const MAX_STORE_CALLS = 1024;

interface PendingBarrier {
  id: number;
  arrived: Set<number>;
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

const loopback = (host: string) => host === 'localhost' || host === '::1' || host === '[::1]' || /^127\./.test(host);

function splitAddress(listen: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(listen);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new DTorchError(ErrorCode.InvalidArgument, `cluster.start: expected listen as host:port (e.g. 127.0.0.1:7070, or port 0 for a free one), got ${JSON.stringify(listen)}`);
  }
  return { host: m[1]!, port };
}

function nonNegative(what: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new DTorchError(ErrorCode.InvalidArgument, `cluster.start: expected a non-negative integer for ${what}, got ${String(value)}`);
  }
  return value;
}

/** Node 0's devices: as given (each kind numbered 0, 1, ... on this host), else every GPU and cpu:0. */
function ownDevices(given: ClusterOptions['devices']): { kind: 'cpu' | 'cuda'; index: number }[] {
  if (given === undefined) return [{ kind: 'cpu', index: 0 }, ...torchInfo().cudaDevices.map((g) => ({ kind: 'cuda' as const, index: g.index }))];
  if (!Array.isArray(given)) throw new DTorchError(ErrorCode.InvalidArgument, 'cluster.start: expected devices as an array of { kind, index }');
  for (const kind of ['cpu', 'cuda'] as const) {
    const indices = given.filter((d) => d?.kind === kind).map((d) => d.index);
    if (indices.some((i, k) => i !== k)) {
      throw new DTorchError(ErrorCode.InvalidArgument, `cluster.start: this node's ${kind} devices must be ${kind}:0, ${kind}:1, ... in order (a mesh names them as on this host), got ${indices.map((i) => `${kind}:${i}`).join(', ')}`);
    }
  }
  if (given.some((d) => d?.kind !== 'cpu' && d?.kind !== 'cuda')) throw new DTorchError(ErrorCode.InvalidArgument, "cluster.start: a device's kind is 'cpu' or 'cuda'");
  return given.map((d) => ({ kind: d.kind, index: d.index }));
}

/** Checks a Join as it came off the wire; a message a worker could not have meant is refused, naming what is wrong. */
function joinProblem(join: JoinMessage | null | undefined): string | undefined {
  if (!join) return 'the first message must be Join';
  if (join.protocol !== CONTROL_PROTOCOL) return `it speaks control protocol ${join.protocol}, this main node ${CONTROL_PROTOCOL}: run the same DTorch version on every node`;
  if (!Array.isArray(join.devices) || join.devices.length === 0) return 'it offers no devices';
  if (join.devices.length > 4096) return `it offers ${join.devices.length} devices (at most 4096)`;
  const seen = new Set<string>();
  for (const d of join.devices) {
    if (d.kind !== 'cpu' && d.kind !== 'cuda') return `it offers a device of kind ${JSON.stringify(String(d.kind).slice(0, 20))} (cpu or cuda)`;
    if (!Number.isSafeInteger(d.index) || d.index < 0 || d.index > 1023) return `it offers ${d.kind}:${d.index} (indices 0 to 1023)`;
    const key = `${d.kind}:${d.index}`;
    if (seen.has(key)) return `it offers ${key} twice`;
    seen.add(key);
  }
  return undefined;
}

/** The main node: start() listens and waits for the workers; see the file's header. */
export class MainNode {
  readonly #server: grpc.Server;
  readonly #token: string | undefined;
  readonly #heartbeatMs: number;
  readonly #lostAfterMs: number;
  readonly #sessions = new Map<number, Session>();
  readonly #lostListeners = new Set<(err: DTorchError) => void>();
  readonly #joinWaiters = new Set<() => void>();
  readonly #refusals: string[] = [];
  #barriers = new Map<number, PendingBarrier>();
  #nextNode = 1;
  #nextIndex = { cpu: 0, cuda: 0 };
  #ownDevices: ClusterDevice[] = [];
  #nextBarrier = 1;
  #watch: NodeJS.Timeout | undefined;
  #closed = false;
  #rejected = 0;
  #address = '';

  /**
   * The rendezvous store where c10d process groups meet: in this process, without a port; the
   * workers' calls reach it over their sessions (StoreRequest), and only theirs.
   */
  readonly store: RendezvousStore;
  /** The op stream to the workers (ZeroMQ), on Welcome.opStreamPort. */
  readonly #stream: OpStreamServer;

  private constructor(server: grpc.Server, store: RendezvousStore, stream: OpStreamServer, token: string | undefined, heartbeatMs: number, lostAfterMs: number) {
    this.#server = server;
    this.store = store;
    this.#stream = stream;
    this.#token = token;
    this.#heartbeatMs = heartbeatMs;
    this.#lostAfterMs = lostAfterMs;
  }

  /** Listens on `options.listen` and resolves once `options.workers` workers joined (TIMEOUT after joinTimeoutMs, naming any refused). */
  static async start(options: ClusterOptions = {}): Promise<MainNode> {
    const listen = options.listen ?? '127.0.0.1:0';
    const { host, port } = splitAddress(listen);
    const token = options.token;
    if (token !== undefined && (typeof token !== 'string' || token.length < 8)) {
      throw new DTorchError(ErrorCode.InvalidArgument, 'cluster.start: the token must be a string of at least 8 characters');
    }
    if (!loopback(host) && token === undefined) {
      throw new DTorchError(ErrorCode.InvalidArgument, `cluster.start: listening on ${listen}, beyond this host, needs a token (options.token, or DTORCH_CLUSTER_TOKEN); without one, listen on 127.0.0.1`);
    }
    const workers = nonNegative('workers', options.workers, 0);
    const joinTimeoutMs = nonNegative('joinTimeoutMs', options.joinTimeoutMs, 60_000);
    const heartbeatMs = Math.max(50, nonNegative('heartbeatMs', options.heartbeatMs, 1000));
    const lostAfterMs = Math.max(2 * heartbeatMs, nonNegative('lostAfterMs', options.lostAfterMs, 3000));
    const server = new grpc.Server({ 'grpc.keepalive_time_ms': 1000, 'grpc.keepalive_timeout_ms': 2000, 'grpc.keepalive_permit_without_calls': 1 });
    const own = ownDevices(options.devices);
    const bareHost = host.replace(/^\[(.*)\]$/, '$1');
    // the rendezvous store of c10d process groups: in this process, reached only through the sessions
    const store = RendezvousStore.local(joinTimeoutMs || 60_000);
    let stream: OpStreamServer;
    try {
      stream = await OpStreamServer.listen({ host: bareHost });
    } catch (err) {
      store.close();
      throw err;
    }
    const main = new MainNode(server, store, stream, token, heartbeatMs, lostAfterMs);
    try {
      main.#joinEngine(own, bareHost);
    } catch (err) {
      stream.close();
      store.close();
      throw err;
    }
    server.addService(controlServiceDefinition((err) => main.#malformed(err)), { Session: (call: grpc.ServerDuplexStream<WorkerMessage, MainMessage>) => main.#session(call) });
    const bound = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(new DTorchError(ErrorCode.Network, `cluster.start: cannot listen on ${listen}: ${err.message}`)) : resolve(p))),
    );
    main.#address = `${host}:${bound}`;
    main.#watch = setInterval(() => main.#checkHeartbeats(), Math.min(500, heartbeatMs)).unref();
    log.info(`cluster: main node listening on ${main.address} (${hostname()})`);
    try {
      options.onListening?.(main.address);
      await main.#waitForWorkers(workers, joinTimeoutMs);
    } catch (err) {
      await main.shutdown('start failed');
      throw err;
    }
    return main;
  }

  /** host:port the server is bound to (the port chosen when listen asked for 0). */
  get address(): string {
    return this.#address;
  }

  /** The worker nodes, in join order (lost ones too, with alive false). */
  nodes(): ClusterNode[] {
    return [...this.#sessions.values()].map((s) => ({ ...s.info, devices: [...s.info.devices] }));
  }

  /** The live workers' devices, of one kind or all, in the order of their cluster-wide index. */
  devices(kind?: 'cpu' | 'cuda'): ClusterDevice[] {
    return [...this.#ownDevices, ...[...this.#sessions.values()].filter((s) => s.info.alive).flatMap((s) => s.info.devices)]
      .filter((d) => kind === undefined || d.kind === kind)
      .map((d) => ({ ...d }));
  }

  /** Calls `listener` with a NODE_LOST error when a worker is lost; returns the unsubscribe. */
  onNodeLost(listener: (err: DTorchError) => void): () => void {
    this.#lostListeners.add(listener);
    return () => this.#lostListeners.delete(listener);
  }

  /**
   * Resolves once the work recorded so far has run on every node (the op stream's sync) and then
   * every live worker answered on the control plane; NODE_LOST if one is lost first, TIMEOUT
   * after timeoutMs in all.
   */
  async barrier(timeoutMs = 60_000): Promise<void> {
    if (this.#closed) throw new DTorchError(ErrorCode.Shutdown, 'cluster.barrier: the cluster was shut down');
    const deadline = Date.now() + timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DTorchError(ErrorCode.Timeout, `cluster.barrier: the work recorded so far did not finish on every node within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([engine().sync(), late]);
    } finally {
      clearTimeout(timer);
    }
    return this.#answered(Math.max(1, deadline - Date.now()));
  }

  // The control plane's part of a barrier: every live worker answers Barrier with Arrived.
  #answered(timeoutMs: number): Promise<void> {
    if (this.#closed) return Promise.reject(new DTorchError(ErrorCode.Shutdown, 'cluster.barrier: the cluster was shut down'));
    const id = this.#nextBarrier++;
    const live = [...this.#sessions.values()].filter((s) => s.info.alive);
    if (live.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#barriers.delete(id);
        const missing = live.filter((s) => !pending.arrived.has(s.info.node)).map((s) => describeNode(s.info));
        reject(new DTorchError(ErrorCode.Timeout, `cluster.barrier: ${missing.join(', ')} did not arrive within ${timeoutMs} ms`));
      }, timeoutMs);
      const pending: PendingBarrier = { id, arrived: new Set(), resolve, reject, timer };
      this.#barriers.set(id, pending);
      for (const s of live) s.call.write({ barrier: { barrier: id } });
    });
  }

  /** Tells every worker to exit, closes their sessions and stops listening; safe to call twice. */
  async shutdown(reason = 'the main program ended the cluster'): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#watch);
    for (const b of this.#barriers.values()) {
      clearTimeout(b.timer);
      b.reject(new DTorchError(ErrorCode.Shutdown, `cluster.barrier: the cluster was shut down (${reason})`));
    }
    this.#barriers.clear();
    for (const s of this.#sessions.values()) {
      if (!s.info.alive) continue;
      s.info.alive = false;
      s.call.write({ shutdown: { reason } });
      s.call.end();
    }
    engine().cluster.leave(`the cluster was shut down (${reason})`);
    this.#stream.close();
    await new Promise<void>((resolve) => this.#server.tryShutdown(() => resolve()));
    this.#server.forceShutdown();
    this.store.close(`the cluster was shut down (${reason})`);
  }

  // Joins this process's engine as node 0: from now on it streams what it records.
  #joinEngine(own: readonly { kind: 'cpu' | 'cuda'; index: number }[], host: string): void {
    const entries: ClusterDeviceEntry[] = own.map((d) => ({ kind: d.kind, index: d.index, node: 0, localIndex: d.index }));
    // Gloo binds the address workers reach this host by; listening on every interface, c10d picks
    engine().cluster.join(0, MainNode.#epoch++, this.store.handle, entries, () => this.#pump(), host === '0.0.0.0' || host === '::' ? '' : host);
    const gpus = own.some((d) => d.kind === 'cuda') ? torchInfo().cudaDevices : [];
    this.#ownDevices = own.map((d) => {
      const gpu = d.kind === 'cuda' ? gpus.find((g) => g.index === d.index) : undefined;
      return { node: 0, kind: d.kind, device: `${d.kind}:${d.index}`, index: d.index, name: gpu?.name ?? '', totalMemory: gpu?.totalMemory ?? 0 };
    });
    for (const d of own) this.#nextIndex[d.kind] = Math.max(this.#nextIndex[d.kind], d.index + 1);
    this.#stream.onMessage((node, payload) => {
      try {
        engine().cluster.answer(node, payload);
      } catch (err) {
        this.#rejected++;
        log.warn(`cluster: refused an answer of node ${node}: ${(err as Error).message}`);
      }
    });
  }

  static #epoch = 1;

  // Sends what the engine posted to every worker that streams, in order.
  #pump(): void {
    if (this.#closed) return;
    const payloads = engine().cluster.takeOutgoing();
    if (payloads.length === 0) return;
    for (const s of this.#sessions.values()) {
      if (!s.info.alive || !s.streaming) continue;
      for (const p of payloads) void this.#stream.send(s.info.node, p);
    }
  }

  #session(call: grpc.ServerDuplexStream<WorkerMessage, MainMessage>): void {
    const peer = call.getPeer();
    const given = call.metadata.get(TOKEN_METADATA)[0];
    if (this.#token !== undefined && (typeof given !== 'string' || !tokensEqual(given, this.#token))) {
      this.#refuse(call, grpc.status.UNAUTHENTICATED, `refused a worker from ${peer}: wrong token`, 'wrong token: give the main node\'s token (--token-file)');
      return;
    }
    let session: Session | undefined;
    call.on('data', (message: WorkerMessage) => {
      try {
        if (!session) {
          session = this.#join(call, peer, message);
          return;
        }
        session.lastHeard = Date.now();
        if (message.body === 'arrived' && message.arrived) this.#arrived(session, message.arrived.barrier);
        else if (message.body === 'storeRequest' && message.storeRequest) this.#storeRequest(session, message.storeRequest);
        else if (message.body === 'join') {
          this.#rejected++;
          this.#lose(session, 'it sent Join twice (a replayed or mixed-up session)', grpc.status.FAILED_PRECONDITION);
        }
      } catch (err) {
        log.warn(`cluster: ${(err as Error).message}`);
      }
    });
    const end = (why: string) => {
      if (session?.info.alive) this.#lose(session, why);
    };
    call.on('end', () => end('its session ended (the worker process exited or was killed)'));
    call.on('error', (err) => end(`its connection failed (${err.message})`));
    call.on('cancelled', () => end('its connection closed (the process died or was killed)'));
    call.on('close', () => end('its connection closed'));
  }

  #malformed(err: Error): void {
    this.#rejected++;
    log.warn(`cluster: refused a malformed message from a worker (${err.message})`);
  }

  /** How many messages or sessions were refused so far (malformed, a wrong token, a bad Join, a replay). */
  get refused(): number {
    return this.#rejected;
  }

  #refuse(call: grpc.ServerDuplexStream<WorkerMessage, MainMessage>, code: grpc.status, logLine: string, details: string): void {
    log.warn(`cluster: ${logLine}`);
    this.#rejected++;
    if (this.#refusals.length < 10) this.#refusals.push(logLine.replace(/^refused /, ''));
    for (const wake of this.#joinWaiters) wake();
    endWithStatus(call, code, details);
  }

  #join(call: grpc.ServerDuplexStream<WorkerMessage, MainMessage>, peer: string, message: WorkerMessage): Session | undefined {
    const problem = message.body === 'join' ? joinProblem(message.join) : 'the first message must be Join';
    if (problem || this.#closed) {
      this.#refuse(call, grpc.status.INVALID_ARGUMENT, `refused a worker from ${peer}: ${problem ?? 'the cluster is shutting down'}`, problem ?? 'the cluster is shutting down');
      return undefined;
    }
    const join = message.join!;
    const node = this.#nextNode++;
    const devices: ClusterDevice[] = join.devices.map((d) => {
      const kind = d.kind as 'cpu' | 'cuda';
      return { node, kind, device: `${kind}:${d.index}`, index: this.#nextIndex[kind]++, name: d.name, totalMemory: d.totalMemory };
    });
    const firstDevice = devices[0]!.index;
    const info: ClusterNode = { node, hostname: join.hostname.slice(0, 255), pid: join.pid, peer, dtorchVersion: join.dtorchVersion, libtorchVersion: join.libtorchVersion, devices, alive: true };
    const session: Session = { info, call, lastHeard: Date.now(), streaming: false, storeCalls: 0 };
    this.#sessions.set(node, session);
    // The op stream: the workers already there get what was posted so far and the new devices;
    // this one gets every device and mesh first, then what everyone gets.
    const key = randomBytes(32);
    this.#stream.admit(node, key);
    this.#pump();
    engine().cluster.addDevices(devices.map((d) => ({ kind: d.kind, index: d.index, node, localIndex: Number(d.device.split(':')[1]) })));
    this.#pump();
    for (const p of engine().cluster.snapshot()) void this.#stream.send(node, p);
    session.streaming = true;
    call.write({ welcome: { node, firstDevice, heartbeatMs: this.#heartbeatMs, opStreamPort: this.#stream.port, opStreamKey: key } });
    log.info(`cluster: node ${node} joined: ${describeNode(info)} with ${devices.map((d) => d.device).join(', ')}`);
    for (const wake of this.#joinWaiters) wake();
    return session;
  }

  // A worker's call on the rendezvous store: run off the JS thread (a get or wait blocks until its
  // keys are set, its timeout, or the session's end), answered on the session. A malformed call
  // is answered with its error; none of them can stop this node.
  #storeRequest(session: Session, message: StoreRequestMessage): void {
    const parsed = storeRequestOf(message);
    const id = Number.isSafeInteger(message.id) ? message.id : 0;
    const answer = (errorCode: string, errorMessage: string): void => void session.call.write({ storeReply: storeReplyMessage(id, { errorCode, errorMessage, value: new Uint8Array(0), number: 0 }) });
    if ('problem' in parsed) {
      this.#rejected++;
      log.warn(`cluster: refused a store request of node ${session.info.node}: ${parsed.problem}`);
      return answer(ErrorCode.InvalidArgument, `refused ${parsed.problem}`);
    }
    if (session.storeCalls >= MAX_STORE_CALLS) return answer(ErrorCode.InvalidArgument, `more than ${MAX_STORE_CALLS} store calls wait at once`);
    session.storeCalls++;
    let answered: Promise<StoreReply>;
    try {
      answered = this.store.answer(session.info.node, parsed.request);
    } catch (err) {
      session.storeCalls--;
      return answer(ErrorCode.Network, (err as Error).message);
    }
    void answered.then(
      (reply) => {
        session.storeCalls--;
        if (session.info.alive && !this.#closed) session.call.write({ storeReply: storeReplyMessage(parsed.id, reply) });
      },
      (err: unknown) => {
        session.storeCalls--;
        if (session.info.alive && !this.#closed) answer(ErrorCode.Internal, (err as Error).message);
      },
    );
  }

  #arrived(session: Session, barrier: number): void {
    const pending = this.#barriers.get(barrier);
    if (!pending) return; // a late or unknown barrier: nothing waits on it
    pending.arrived.add(session.info.node);
    const live = [...this.#sessions.values()].filter((s) => s.info.alive);
    if (live.every((s) => pending.arrived.has(s.info.node))) {
      clearTimeout(pending.timer);
      this.#barriers.delete(barrier);
      pending.resolve();
    }
  }

  #checkHeartbeats(): void {
    const now = Date.now();
    for (const s of this.#sessions.values()) {
      if (s.info.alive && now - s.lastHeard > this.#lostAfterMs) this.#lose(s, `it sent no heartbeat for ${now - s.lastHeard} ms`, grpc.status.DEADLINE_EXCEEDED);
    }
  }

  #lose(session: Session, why: string, code?: grpc.status): void {
    if (!session.info.alive || this.#closed) return;
    session.info.alive = false;
    const err = new DTorchError(ErrorCode.NodeLost, `cluster: lost node ${session.info.node} (${describeNode(session.info)}): ${why}`);
    log.warn(err.message);
    engine().cluster.nodeLost(session.info.node, err.message);
    this.#stream.forget(session.info.node);
    this.store.forget(session.info.node);
    if (code !== undefined) endWithStatus(session.call, code, why);
    for (const b of this.#barriers.values()) {
      clearTimeout(b.timer);
      b.reject(err);
    }
    this.#barriers.clear();
    for (const listener of this.#lostListeners) listener(err);
  }

  async #waitForWorkers(count: number, timeoutMs: number): Promise<void> {
    const joined = () => [...this.#sessions.values()].filter((s) => s.info.alive).length;
    if (joined() >= count) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#joinWaiters.delete(check);
        const refused = this.#refusals.length ? `; refused: ${this.#refusals.join('; ')}` : '';
        reject(new DTorchError(ErrorCode.Timeout, `cluster.start: ${joined()} of ${count} workers joined ${this.address} within ${timeoutMs} ms${refused}`));
      }, timeoutMs);
      const check = () => {
        if (joined() < count) return;
        clearTimeout(timer);
        this.#joinWaiters.delete(check);
        resolve();
      };
      this.#joinWaiters.add(check);
    });
  }
}

// Ends a worker's session with a gRPC status (grpc-js sends the status of an 'error' emitted on a
// server stream); the listener keeps Node from treating that event as unhandled.
function endWithStatus(call: grpc.ServerDuplexStream<WorkerMessage, MainMessage>, code: grpc.status, details: string): void {
  call.on('error', () => undefined);
  call.emit('error', { code, details } as grpc.ServiceError);
}

function describeNode(n: ClusterNode): string {
  return `${n.hostname} pid ${n.pid}, ${n.peer}`;
}
