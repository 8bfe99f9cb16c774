// A worker node: joins the main node's Control service, sends its heartbeat, answers barriers,
// applies the main node's op stream (ZeroMQ) to this process's engine, which lowers the ranks
// this node holds and sends back the reads and syncs it answers, and ends when the main node
// says so or is gone. Its c10d process groups meet in the main node's rendezvous store through a
// relay over this session (the store has no port). Started by `dtorch worker` (or runWorker from
// code) on each host, by whatever the site uses (ssh, Slurm, Kubernetes). A main node that dies,
// is cut off or stops answering (SIGSTOP: no reset comes) ends the worker within 5 s: gRPC
// keepalive pings every second, 2 s to answer; the session's end fails the store calls and aborts
// the collectives with other nodes, so nothing holds the process.
import { hostname } from 'node:os';
import { DTorchError, ErrorCode, log } from '@dtorch/common';
import {
  CONTROL_PROTOCOL,
  OpStreamClient,
  RendezvousStore,
  TOKEN_METADATA,
  controlClient,
  dtorchVersion,
  grpc,
  storeReplyOf,
  storeRequestMessage,
  torchInfo,
  type ControlDevice,
  type MainMessage,
} from '@dtorch/external';
import { engine } from '../engine.js';

/** How a worker joins (dtorch worker's flags). */
export interface WorkerOptions {
  /** The main node's host:port. */
  main: string;
  /** The cluster's token (dtorch worker --token-file), if the main node has one. */
  token?: string;
  /** The devices this worker offers, e.g. [{ kind: 'cpu', index: 0 }, ...]. */
  devices: readonly {
    /** "cpu" or "cuda". */
    kind: 'cpu' | 'cuda';
    /** The device's index on this host. */
    index: number;
  }[];
  /** How long to wait for the main node's Welcome, in ms (default 30000). */
  joinTimeoutMs?: number;
  /** Called once joined and registered in the rendezvous store, with the node number and the cluster-wide index of its first device. */
  onWelcome?: (welcome: { node: number; firstDevice: number }) => void;
}

/** How a worker's session ended: the main node's Shutdown (with its reason). Losing the main node or being refused rejects instead. */
export interface WorkerEnd {
  /** The node number the main node gave this worker. */
  node: number;
  /** The main node's reason. */
  reason: string;
}

function inventory(devices: WorkerOptions['devices']): ControlDevice[] {
  const cuda = devices.some((d) => d.kind === 'cuda') ? torchInfo().cudaDevices : [];
  return devices.map(({ kind, index }) => {
    if (kind === 'cpu') return { kind, index, name: '', totalMemory: 0 };
    const gpu = cuda.find((g) => g.index === index);
    if (!gpu) throw new DTorchError(ErrorCode.InvalidArgument, `dtorch worker: there is no cuda:${index} on this host (${cuda.length} GPU(s))`);
    return { kind, index, name: gpu.name, totalMemory: gpu.totalMemory };
  });
}

/** Joins `options.main` and serves until the main node shuts the cluster down (resolves) or is lost, or refuses this worker (rejects). */
export function runWorker(options: WorkerOptions): Promise<WorkerEnd> {
  const devices = inventory(options.devices);
  if (devices.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, 'dtorch worker: offer at least one device (--devices cpu:0-3 or cuda:0-7)');
  const client = controlClient(options.main, { 'grpc.keepalive_time_ms': 1000, 'grpc.keepalive_timeout_ms': 2000, 'grpc.keepalive_permit_without_calls': 1 });
  const metadata = new grpc.Metadata();
  if (options.token !== undefined) metadata.set(TOKEN_METADATA, options.token);
  const call = client.Session(metadata);
  return new Promise<WorkerEnd>((resolve, reject) => {
    let node = 0;
    let heartbeat: NodeJS.Timeout | undefined;
    let settled = false;
    let store: RendezvousStore | undefined;
    let stream: OpStreamClient | undefined;
    let joined = false; // this process's engine follows the main node's
    let refusals = 0;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(joinTimer);
      clearInterval(heartbeat);
      // first the store (a group being made fails at once), then the collectives (aborted)
      store?.close('the session with the main node ended');
      if (joined) engine().cluster.leave('the worker left the cluster');
      stream?.close();
      call.end();
      client.close();
      outcome();
    };
    const joinTimeoutMs = options.joinTimeoutMs ?? 30_000;
    const joinTimer = setTimeout(
      () => finish(() => reject(new DTorchError(ErrorCode.Timeout, `dtorch worker: no answer from the main node at ${options.main} within ${joinTimeoutMs} ms`))),
      joinTimeoutMs,
    );
    call.on('data', (message: MainMessage) => {
      if (settled) return;
      if (message.body === 'welcome' && message.welcome && node === 0) {
        clearTimeout(joinTimer);
        node = message.welcome.node;
        let sequence = 0;
        heartbeat = setInterval(() => call.write({ heartbeat: { sequence: ++sequence } }), Math.max(50, message.welcome.heartbeatMs));
        log.info(`cluster: joined ${options.main} as node ${node}`);
        const { firstDevice, opStreamPort, opStreamKey } = message.welcome;
        const mainHost = options.main.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
        // the rendezvous store, where c10d process groups meet: the main node's, each call a
        // StoreRequest on this session (answered by a StoreReply of the same id)
        const relay = RendezvousStore.relay((id, request) => {
          if (settled) throw new DTorchError(ErrorCode.Network, 'the session with the main node ended');
          call.write({ storeRequest: storeRequestMessage(id, request) });
        }, joinTimeoutMs);
        store = relay;
        // registers: node/<n> holds this host's name, nodes counts the workers that reached the store
        void relay.set(`node/${node}`, hostname())
          .then(() => relay.add('nodes', 1))
          .then(() => {
            if (settled) return;
            // the op stream: what the main node records, applied here; answers go back
            // Gloo groups: loopback when the main node is on this host, else c10d's choice of this host's address
            const glooHost = /^(127\.|localhost$|::1$)/.test(mainHost) ? '127.0.0.1' : '';
            engine().cluster.join(node, 0, relay.handle, [], () => {
              for (const p of engine().cluster.takeOutgoing()) void stream?.send(p);
            }, glooHost);
            joined = true;
            if (!opStreamPort || !opStreamKey) throw new DTorchError(ErrorCode.Protocol, 'the Welcome names no op stream (run the same DTorch version on every node)');
            stream = OpStreamClient.connect({ host: mainHost, port: opStreamPort, key: opStreamKey });
            stream.onMessage((payload) => {
              try {
                engine().cluster.apply(payload);
              } catch (err) {
                // the engine told the main node, whose waits on this node now fail
                if (refusals++ < 10) log.error(`cluster: refused a payload of the op stream: ${(err as Error).message}`);
              }
            });
            options.onWelcome?.({ node, firstDevice });
          })
          .catch((err: unknown) => finish(() => reject(new DTorchError(ErrorCode.Network, `dtorch worker: cannot use the main node's rendezvous store (${(err as Error).message})`))));
      } else if (message.body === 'barrier' && message.barrier) {
        call.write({ arrived: { barrier: message.barrier.barrier } }); // nothing runs on workers yet that a barrier waits for
      } else if (message.body === 'storeReply' && message.storeReply) {
        const { id, reply } = storeReplyOf(message.storeReply);
        store?.reply(id, reply);
      } else if (message.body === 'shutdown') {
        const reason = message.shutdown?.reason ?? '';
        finish(() => resolve({ node, reason }));
      }
    });
    call.on('error', (err: grpc.ServiceError) => {
      if (err.code === grpc.status.UNAUTHENTICATED) {
        finish(() => reject(new DTorchError(ErrorCode.AccessDenied, `dtorch worker: the main node at ${options.main} refused the token (${err.details}); give its token with --token-file`)));
      } else if (node === 0 && err.code !== grpc.status.UNAVAILABLE) {
        finish(() => reject(new DTorchError(ErrorCode.InvalidArgument, `dtorch worker: the main node at ${options.main} refused this worker: ${err.details}`)));
      } else {
        const where = node === 0 ? `cannot reach the main node at ${options.main}` : `lost the main node at ${options.main}`;
        finish(() => reject(new DTorchError(ErrorCode.NodeLost, `dtorch worker: ${where} (${err.details || err.message})`)));
      }
    });
    call.on('end', () => finish(() => reject(new DTorchError(ErrorCode.NodeLost, `dtorch worker: the main node at ${options.main} ended the session without a shutdown`))));
    call.write({ join: { protocol: CONTROL_PROTOCOL, hostname: hostname(), pid: process.pid, dtorchVersion, libtorchVersion: torchInfo().libtorchVersion, devices } });
  });
}
