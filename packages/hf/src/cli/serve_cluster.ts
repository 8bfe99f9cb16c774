// `dtorch serve`'s cluster flags (docs/serve.md, "Behind a cluster"): --cluster-workers N makes
// the server the main node of a cluster (dt.cluster.start, docs/cluster.md) that waits for N
// `dtorch worker`s before the pipeline loads; --devices then names the cluster's devices by their
// cluster-wide index (this process's first, then each worker's in join order). The other flags
// say where it listens, the token workers present, how long to wait for them, and which of this
// host's devices the server itself offers.
import { readFileSync } from 'node:fs';
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { parseDevices, type DeviceSpec } from './mesh_spec.js';
import { invalid } from './invalid_flag.js';

/** The cluster flags of `dtorch serve`. */
export interface ServeClusterFlags {
  /** --cluster-workers: start a cluster and wait for this many workers before loading. */
  clusterWorkers?: number;
  /** --cluster-listen host:port (default 127.0.0.1:0: loopback, a free port). */
  clusterListen?: string;
  /** --cluster-token-file: its first line is the token workers present (default DTORCH_CLUSTER_TOKEN). */
  clusterTokenFile?: string;
  /** --cluster-join-timeout in seconds (default 60). */
  clusterJoinTimeout?: number;
  /** --cluster-main-devices: this process's own devices in the cluster (default every GPU and cpu:0). */
  clusterMainDevices?: string;
}

/** Refuses a cluster flag given without --cluster-workers (it would be ignored). */
export function checkServeClusterFlags(flags: ServeClusterFlags): void {
  if (flags.clusterWorkers !== undefined) return;
  const stray = (
    [
      ['--cluster-listen', flags.clusterListen],
      ['--cluster-token-file', flags.clusterTokenFile],
      ['--cluster-join-timeout', flags.clusterJoinTimeout],
      ['--cluster-main-devices', flags.clusterMainDevices],
    ] as const
  ).find(([, value]) => value !== undefined);
  if (stray) throw invalid(`${stray[0]} needs --cluster-workers N: the server starts a cluster only when told how many workers to wait for`);
}

// the token file's first line (never printed)
function readClusterToken(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new DTorchError(ErrorCode.BadFile, `--cluster-token-file ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const token = text.split(/\r?\n/, 1)[0]!.trim();
  if (token === '') throw new DTorchError(ErrorCode.BadFile, `--cluster-token-file ${file}: its first line is empty; write the cluster's token there (e.g. openssl rand -hex 32 > ${file})`);
  return token;
}

/**
 * Starts the cluster the flags ask for and waits for its workers (a line when it listens, one per
 * worker once they joined); false without --cluster-workers.
 */
export async function startServeCluster(flags: ServeClusterFlags): Promise<boolean> {
  checkServeClusterFlags(flags);
  if (flags.clusterWorkers === undefined) return false;
  const own = flags.clusterMainDevices === undefined ? undefined : parseDevices(flags.clusterMainDevices);
  if (own && own.indices === undefined) throw invalid(`--cluster-main-devices: name the devices, e.g. ${own.kind}:0 or ${own.kind}:0-1`);
  const workers = flags.clusterWorkers;
  await dt.cluster.start({
    workers,
    ...(flags.clusterListen !== undefined && { listen: flags.clusterListen }),
    ...(flags.clusterTokenFile !== undefined && { token: readClusterToken(flags.clusterTokenFile) }),
    ...(flags.clusterJoinTimeout !== undefined && { joinTimeoutMs: flags.clusterJoinTimeout * 1000 }),
    ...(own && { devices: own.indices!.map((index) => ({ kind: own.kind, index })) }),
    onListening: (address) => console.log(`cluster: listening on ${address}; waiting for ${workers} worker${workers === 1 ? '' : 's'} (dtorch worker --main ${address})`),
  });
  for (const n of dt.cluster.nodes()) console.log(`cluster: node ${n.node} joined from ${n.hostname} (pid ${n.pid}) with ${n.devices.map((d) => `${d.device} as ${d.kind} ${d.index}`).join(', ')}`);
  // what bounds the wait of this process's ranks in a collective with a lost worker that had not
  // connected yet: the pipeline built again after a loss may wait that long for its devices
  console.log(`cluster: collectives wait at most ${dt.nativeSettings().collectiveTimeoutMs / 1000} s (DTORCH_COLLECTIVE_TIMEOUT_MS)`);
  return true;
}

/**
 * Ends the cluster (its workers exit 0), after this process's devices ran what was recorded: a
 * process that exits while its ranks still unwind a collective with a lost worker aborts in the
 * engine's teardown, so the wait comes first (bounded; a failure of that work was reported to its job).
 */
export async function endCluster(reason = 'the server stopped'): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(dt.nativeSettings().collectiveTimeoutMs, 60_000) + 5000)));
  await Promise.race([dt.sync().catch(() => undefined), bound]);
  clearTimeout(timer);
  await dt.cluster.shutdown(reason);
}

/**
 * --devices checked against the running cluster's devices (indices are cluster-wide): an index
 * none of its nodes has is an error listing what each node has.
 */
export function parseClusterDevices(text: string): DeviceSpec {
  const kind = /^\s*(cpu|cuda)\b/.exec(text)?.[1] as 'cpu' | 'cuda' | undefined;
  const devices = kind ? dt.cluster.devices(kind) : [];
  const known = new Set(devices.map((d) => d.index));
  const count = devices.reduce((most, d) => Math.max(most, d.index + 1), 0);
  const missing = (index: number) => {
    const byNode = new Map<number, number[]>();
    for (const d of devices) byNode.set(d.node, [...(byNode.get(d.node) ?? []), d.index]);
    const has = [...byNode].map(([node, list]) => `node ${node}: ${kind} ${list.join(',')}`).join('; ') || `no ${kind} device`;
    return invalid(`--devices: the cluster has no ${kind} device ${index} (its devices are numbered across the nodes: ${has})`);
  };
  let spec: DeviceSpec;
  try {
    spec = parseDevices(text, Math.max(count, 1));
  } catch (err) {
    // past the last index: said in the cluster's terms, not this process's
    const past = /device (\d+) does not exist/.exec((err as Error).message);
    throw past ? missing(Number(past[1])) : err;
  }
  const absent = (spec.indices ?? []).find((index) => !known.has(index));
  if (absent !== undefined) throw missing(absent);
  return spec;
}

/** Whether `mesh` has devices on more than one node of the running cluster. */
export function spansNodes(mesh: dt.DeviceMesh): boolean {
  const nodeOf = new Map(dt.cluster.devices(mesh.deviceType).map((d) => [d.index, d.node]));
  return new Set(mesh.devices.map((d) => nodeOf.get(d))).size > 1;
}
