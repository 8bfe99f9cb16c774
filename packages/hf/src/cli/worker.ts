// `dtorch worker --main host:port [--token-file F] [--devices cpu:0-3 | cuda:0-7]`: this host
// joins a cluster's main node (dt.cluster.start on the main program's host) and serves until the
// main node ends the cluster (exit 0) or is lost, or refuses it (one line, exit 1). The token is
// read from the file (or DTORCH_CLUSTER_TOKEN), never printed.
import { readFileSync } from 'node:fs';
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { parseDevices } from './mesh_spec.js';

/** dtorch worker's flags. */
export interface WorkerFlags {
  /** The main node's host:port. */
  main: string;
  /** A file holding the cluster's token (its first line). */
  tokenFile?: string;
  /** The devices to offer (default: every GPU, else cpu:0). */
  devices?: string;
}

// the file's first line; without --token-file, dt.cluster.runWorker takes DTORCH_CLUSTER_TOKEN
function readToken(flags: WorkerFlags): string | undefined {
  if (flags.tokenFile === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(flags.tokenFile, 'utf8');
  } catch (err) {
    throw new DTorchError(ErrorCode.NotFound, `--token-file: cannot read ${flags.tokenFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const token = text.split('\n')[0]!.trim();
  if (token === '') throw new DTorchError(ErrorCode.InvalidArgument, `--token-file: ${flags.tokenFile} is empty; write the cluster's token on its first line`);
  return token;
}

/** Runs the worker until the cluster ends; prints one line when it joins and one when it ends. */
export async function runWorkerCommand(flags: WorkerFlags): Promise<void> {
  const token = readToken(flags);
  const spec = flags.devices === undefined ? undefined : parseDevices(flags.devices);
  const gpus = dt.torchInfo().cudaDeviceCount;
  const kind = spec?.kind ?? (gpus > 0 ? 'cuda' : 'cpu');
  const indices = spec?.indices ?? (kind === 'cuda' ? Array.from({ length: gpus }, (_, i) => i) : [0]);
  const end = await dt.cluster.runWorker({
    main: flags.main,
    ...(token !== undefined ? { token } : {}),
    devices: indices.map((index) => ({ kind, index })),
    onWelcome: ({ node, firstDevice }) => console.log(`joined ${flags.main} as node ${node}: ${indices.map((i) => `${kind}:${i}`).join(', ')} (cluster devices ${firstDevice}-${firstDevice + indices.length - 1})`),
  });
  console.log(`node ${end.node}: the main node ended the cluster${end.reason ? ` (${end.reason})` : ''}`);
}
