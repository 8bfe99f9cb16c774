// The cluster's rendezvous store (where c10d's Gloo groups of the nodes meet) answers only the
// cluster's authenticated sessions: it lives in the main node's process and has no port. With
// real `dtorch worker` processes, on loopback and on a non-loopback listen address: the main
// node's process listens on gRPC and the op stream only (read from /proc), and a raw c10d
// TCPStore client (LibTorch's, through the addon) pointed at each of its ports can neither set nor
// get a key; the workers still register and their Gloo groups still form and move data through
// the relay over their sessions (a group with the main node too, after which Gloo's own port is
// probed as well); a store request on a session without the token, or before Join, is refused
// and changes nothing, where the same request after Join is answered.
import { execFile } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { MainNode } from '@dtorch/core';
import { CONTROL_PROTOCOL, TOKEN_METADATA, controlClient, grpc, type MainMessage } from '@dtorch/external';
import { listeningSockets, type ListeningSocket } from './listening_sockets.js';
import { startWorker, stopAll, waitForOutput, within, type Child } from './cluster_processes.js';

const token = 'a-store-test-token-0123456789';
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
let main: MainNode | undefined;

afterEach(async () => {
  await main?.shutdown();
  main = undefined;
  stopAll();
});

// What a raw c10d TCPStore client without the token managed at host:port: 'set' of probe/evil,
// 'get' of node/1 (an empty list: nothing). In a process of its own, ended after 10 s: a port that
// is no TCPStore fails the client's handshake, or (Gloo's) never answers it; its stderr takes
// LibTorch's complaints about that.
async function probe(host: string, port: number): Promise<string[]> {
  const script = `
    import { RendezvousStore } from '@dtorch/external';
    const client = await RendezvousStore.connect(${JSON.stringify(host)}, ${port}, 2000).catch(() => process.exit(0));
    await client.set('probe/evil', 'x').then(() => console.log('set'), () => undefined);
    await client.get('node/1').then(() => console.log('get'), () => undefined);
    process.exit(0);`;
  const printed = await new Promise<string>((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: root, timeout: 10_000 }, (_err, stdout) => resolve(String(stdout)));
  });
  return printed.split('\n').filter((l) => l === 'set' || l === 'get');
}

// Probes each of `sockets` at its address (loopback for one on every interface) and at `alsoAt`,
// all at once; expects nothing to work anywhere, and probe/evil unset.
async function expectNoStore(sockets: ListeningSocket[], alsoAt: string[] = []): Promise<void> {
  const targets = sockets.flatMap(({ address, port }) => [...new Set([address === '0.0.0.0' || address === '::' ? '127.0.0.1' : address, ...alsoAt])].map((host) => ({ host, port, address })));
  const results = await Promise.all(targets.map(({ host, port }) => probe(host, port)));
  targets.forEach(({ host, port, address }, i) => expect(results[i], `a raw TCPStore client at ${host}:${port} (listening on ${address})`).toEqual([]));
  expect(await main!.store.check(['probe/evil']), 'probe/evil was set').toBe(false);
}

async function startCluster(listen: string, workerCount: number): Promise<Child[]> {
  const workers: Child[] = [];
  const started = MainNode.start({
    listen,
    token,
    workers: workerCount,
    devices: [{ kind: 'cpu', index: 0 }],
    joinTimeoutMs: 30_000,
    onListening: (address) => {
      for (let i = 0; i < workerCount; i++) workers.push(startWorker(address, { token, devices: 'cpu:0-1' }));
    },
  });
  main = await within('starting the cluster', 40_000, started, workers);
  for (const w of workers) await waitForOutput(w, /joined \S+ as node/); // printed once registered in the store
  return workers;
}

const portOf = (address: string) => Number(/:(\d+)$/.exec(address)![1]);

// The sockets this process listens on that `before` did not have (a Gloo group of an earlier test
// keeps its listener for the life of the process).
const newSockets = (before: ListeningSocket[]) => listeningSockets(process.pid).filter((s) => !before.some((b) => b.address === s.address && b.port === s.port));

describe('the rendezvous store of a cluster', () => {
  it('has no port on loopback: a raw TCPStore client gets nowhere, and the Gloo groups meet through the sessions', async () => {
    const before = listeningSockets(process.pid);
    const workers = await startCluster('127.0.0.1:0', 2);
    // the workers registered through their sessions: node/<n> and the count
    expect(await main!.store.add('nodes', 0)).toBe(2);
    expect((await Promise.all([main!.store.get('node/1'), main!.store.get('node/2')])).map(String)).toEqual(main!.nodes().map((n) => n.hostname));
    // this process listens on gRPC and the op stream, on loopback, and nothing else
    const sockets = newSockets(before);
    expect(sockets, JSON.stringify(sockets)).toHaveLength(2);
    expect(sockets.every((s) => s.address === '127.0.0.1'), JSON.stringify(sockets)).toBe(true);
    expect(sockets.map((s) => s.port)).toContain(portOf(main!.address));
    await expectNoStore(sockets);

    // cluster cpu devices: 0 here, 1-2 node 1's, 3-4 node 2's; a Gloo group of the two workers
    // (meeting in this process's store, through their sessions), then one with this process too
    for (const devices of [[1, 3], [0, 2, 4]]) {
      const mesh = new dt.DeviceMesh('cpu', devices);
      const x = dt.arange(12, { mesh, placements: [dt.Shard(0)] }).mul(2);
      const all = x.redistribute([dt.Replicate()]); // an all-gather between the nodes
      expect(Array.from((await within(`a Gloo group over ${devices}`, 30_000, all.data(), workers)) as BigInt64Array, Number)).toEqual(Array.from({ length: 12 }, (_, i) => 2 * i));
      dt.dispose([x, all]);
    }
    // Gloo's own listener (this process is in a group now, on the listen address) is no store either
    const withGloo = newSockets(before);
    expect(withGloo, JSON.stringify(withGloo)).toHaveLength(3);
    expect(withGloo.every((s) => s.address === '127.0.0.1'), JSON.stringify(withGloo)).toBe(true);
    await expectNoStore(withGloo.filter((s) => !sockets.some((o) => o.port === s.port)));
    expect(String(await main!.store.get('node/1'))).toBe(main!.nodes()[0]!.hostname);
  }, 90_000);

  const external = Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && !a.internal && a.family === 'IPv4');
  if (!external) console.log('rendezvous_store.test.ts: no non-internal IPv4 interface here, so the non-loopback case is skipped');

  it.skipIf(!external)('has no port on a non-loopback listen address either', async () => {
    const host = external!.address;
    const before = listeningSockets(process.pid);
    await startCluster(`${host}:0`, 1);
    expect(await main!.store.add('nodes', 0)).toBe(1);
    const sockets = newSockets(before);
    expect(sockets, JSON.stringify(sockets)).toHaveLength(2);
    expect(sockets.every((s) => s.address === host), JSON.stringify(sockets)).toBe(true); // that address only, not every interface
    await expectNoStore(sockets, ['127.0.0.1']);
  }, 60_000);

  it('refuses a store request on a session without the token or before Join, and answers it after Join', async () => {
    main = await MainNode.start({ token });
    const client = controlClient(main.address);
    const set = (key: string) => ({ storeRequest: { id: 1, op: 'STORE_OP_SET', keys: [key], value: Buffer.from('x'), expected: Buffer.alloc(0), delta: 0, timeoutMs: 0 } });
    const session = (metadata: grpc.Metadata) => {
      const call = client.Session(metadata);
      const replies: MainMessage[] = [];
      call.on('data', (m: MainMessage) => replies.push(m));
      const ended = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
      return { call, replies, ended };
    };
    const withToken = () => {
      const m = new grpc.Metadata();
      m.set(TOKEN_METADATA, token);
      return m;
    };
    try {
      const anonymous = session(new grpc.Metadata());
      anonymous.call.write(set('probe/no-token'));
      expect((await within('the refusal of a session without the token', 10_000, anonymous.ended)).code).toBe(grpc.status.UNAUTHENTICATED);

      const early = session(withToken());
      early.call.write(set('probe/before-join'));
      const refused = await within('the refusal of a store request before Join', 10_000, early.ended);
      expect([refused.code, refused.details]).toEqual([grpc.status.INVALID_ARGUMENT, 'the first message must be Join']);
      for (const s of [anonymous, early]) expect(s.replies).toEqual([]);
      expect(await main.store.check(['probe/no-token'])).toBe(false);
      expect(await main.store.check(['probe/before-join'])).toBe(false);

      // the same request on a joined session is answered (the refusals above are the token's and Join's)
      const joined = session(withToken());
      joined.call.write({ join: { protocol: CONTROL_PROTOCOL, hostname: 'probe', pid: 1, dtorchVersion: '0', libtorchVersion: '0', devices: [{ kind: 'cpu', index: 0, name: '', totalMemory: 0 }] } });
      joined.call.write(set('probe/joined'));
      await within('the answer after Join', 10_000, (async () => {
        while (!joined.replies.some((m) => m.body === 'storeReply')) await new Promise((r) => setTimeout(r, 20));
      })());
      expect(joined.replies.find((m) => m.body === 'storeReply')!.storeReply).toMatchObject({ id: 1, errorCode: '' });
      expect(await main.store.check(['probe/joined'])).toBe(true);
      joined.call.end();
    } finally {
      client.close();
    }
  });
});
