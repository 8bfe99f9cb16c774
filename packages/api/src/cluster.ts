// dt.cluster: one program, several hosts (docs/cluster.md). start() makes this process the main
// node that worker nodes (`dtorch worker` on each host) join over gRPC; devices() lists every
// node's devices, each kind numbered across the cluster (this process's first, as on its host,
// then each worker's in join order): a DeviceMesh names them by that index, and everything
// recorded on a mesh over other nodes' devices streams to them over ZeroMQ, with c10d (Gloo)
// collectives between the processes. barrier() waits for every node; a lost node rejects what
// waits on it (NODE_LOST) and reaches onNodeLost's listeners; shutdown() ends it all, after which
// start() may run again; runWorker() is `dtorch worker` from code.
import { DTorchError, ErrorCode, config } from '@dtorch/common';
import { MainNode, runWorker as serveAsWorker, type ClusterDevice, type ClusterNode, type ClusterOptions, type WorkerEnd, type WorkerOptions } from '@dtorch/core';

let main: MainNode | undefined;

function running(what: string): MainNode {
  if (!main) throw new DTorchError(ErrorCode.InvalidArgument, `cluster.${what}: no cluster is running; call await dt.cluster.start(...) first`);
  return main;
}

/**
 * Makes this process the main node: listens on `options.listen` (default 127.0.0.1:0, loopback
 * and a free port) and waits for `options.workers` workers. The token defaults to
 * DTORCH_CLUSTER_TOKEN; a non-loopback address without one is refused. This process's own
 * devices in the cluster are `options.devices` (default every GPU of the host and cpu:0).
 * Resolves to the address workers join (host:port).
 */
export async function start(options: ClusterOptions = {}): Promise<string> {
  if (main) throw new DTorchError(ErrorCode.InvalidArgument, `cluster.start: a cluster is already running on ${main.address}; shut it down first`);
  const token = options.token ?? config.clusterToken;
  main = await MainNode.start({ ...options, ...(token !== undefined ? { token } : {}) }).catch((err: unknown) => {
    main = undefined;
    throw err;
  });
  return main.address;
}

/** Whether a cluster is running (start() resolved and shutdown() has not been called). */
export function isRunning(): boolean {
  return main !== undefined;
}

/** The address worker nodes join (host:port). */
export function address(): string {
  return running('address').address;
}

/** The worker nodes in join order (lost ones too, with alive false). */
export function nodes(): ClusterNode[] {
  return running('nodes').nodes();
}

/** Every live node's devices (of one kind, or all; this process's are node 0's), each with the index a DeviceMesh names it by. */
export function devices(kind?: 'cpu' | 'cuda'): ClusterDevice[] {
  return running('devices').devices(kind);
}

/** Resolves once the work recorded so far ran on every node and every live worker answered (TIMEOUT after timeoutMs, NODE_LOST if one is lost first). */
export function barrier(timeoutMs?: number): Promise<void> {
  return running('barrier').barrier(timeoutMs);
}

/** Calls `listener` with a NODE_LOST DTorchError naming the node when a worker is lost; returns the unsubscribe. */
export function onNodeLost(listener: (err: DTorchError) => void): () => void {
  return running('onNodeLost').onNodeLost(listener);
}

/** Tells every worker to exit and stops listening; start() may then run again. Does nothing when no cluster runs. */
export async function shutdown(reason?: string): Promise<void> {
  const m = main;
  main = undefined;
  await m?.shutdown(reason);
}

/**
 * `dtorch worker` from code: joins the main node at `options.main` with `options.devices` and
 * serves until the main node ends the cluster (resolves with the node number and the reason) or
 * is lost, or refuses this worker (rejects: NODE_LOST, ACCESS_DENIED, TIMEOUT). The token
 * defaults to DTORCH_CLUSTER_TOKEN.
 */
export function runWorker(options: WorkerOptions): Promise<WorkerEnd> {
  const token = options.token ?? config.clusterToken;
  return serveAsWorker({ ...options, ...(token !== undefined ? { token } : {}) });
}

export type { ClusterDevice, ClusterNode, ClusterOptions, WorkerEnd, WorkerOptions };
