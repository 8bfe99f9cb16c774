// The cluster's control plane with real processes on 127.0.0.1: this test process is the main
// node (dt.cluster.start), `dtorch worker` children join it. Joining and the device inventory,
// barriers, shutdown and a second start, a wrong token refused on both sides, a worker killed with
// SIGKILL noticed within 5 s (and a wait on it rejected), a main node killed, or stopped with
// SIGSTOP (no reset comes: gRPC's keepalive must end the session, and the worker's ranks waiting
// on it in a collective must not hold the exit), ending its worker within 5 s, bad addresses, and
// 10,000 malformed, truncated and replayed messages refused without a crash. Ports are chosen free (port 0); every child is ended by the test.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as dt from '@dtorch/api';
import { MainNode } from '@dtorch/core';
import { CONTROL_PROTOCOL, TOKEN_METADATA, encodeWorkerMessage, grpc } from '@dtorch/external';
import { startNode, startWorker, stopAll, waitForOutput, within, type Child } from './cluster_processes.js';

const token = 'a-test-token-0123456789';
const ownCpu = [{ kind: 'cpu' as const, index: 0 }];

afterEach(async () => {
  await dt.cluster.shutdown();
  stopAll();
});

// starts a cluster waiting for `count` workers, which it starts as soon as it listens
async function clusterOf(count: number, options: { token?: string; workerToken?: string; devices?: string; joinTimeoutMs?: number } = {}) {
  const workers: Child[] = [];
  const started = dt.cluster.start({
    devices: ownCpu, // this process's GPUs would be node 0's devices too, by default
    workers: count,
    joinTimeoutMs: options.joinTimeoutMs ?? 20_000,
    ...(options.token !== undefined ? { token: options.token } : {}),
    onListening: (address) => {
      for (let i = 0; i < count; i++) {
        const workerToken = options.workerToken ?? options.token;
        workers.push(startWorker(address, { devices: options.devices ?? 'cpu:0-1', ...(workerToken !== undefined ? { token: workerToken } : {}) }));
      }
    },
  });
  return { started, workers };
}

describe('a cluster of 2 worker processes on 127.0.0.1', () => {
  it('joins them with their devices, numbered in join order; barriers; shutdown ends them; a second start works', async () => {
    const { started, workers } = await clusterOf(2, { token });
    const address = await started;
    expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
    const nodes = dt.cluster.nodes();
    expect(nodes.map((n) => n.node)).toEqual([1, 2]);
    for (const n of nodes) {
      expect(n.alive).toBe(true);
      expect(n.devices.map((d) => d.device)).toEqual(['cpu:0', 'cpu:1']);
      expect(n.libtorchVersion).toMatch(/^\d+\.\d+\.\d+/);
    }
    // node 0 (this process) offers its cpu:0; each kind is numbered across the nodes
    expect(dt.cluster.devices('cpu').map((d) => [d.node, d.device, d.index])).toEqual([
      [0, 'cpu:0', 0], [1, 'cpu:0', 1], [1, 'cpu:1', 2], [2, 'cpu:0', 3], [2, 'cpu:1', 4],
    ]);
    expect(dt.cluster.devices('cuda')).toEqual([]);
    await dt.cluster.barrier(5000);
    await dt.cluster.barrier(5000);
    for (const w of workers) await waitForOutput(w, /joined 127\.0\.0\.1:\d+ as node [12]: cpu:0, cpu:1/);

    const shutdownAt = Date.now();
    await dt.cluster.shutdown('test done');
    for (const w of workers) {
      const { code, at } = await w.exited;
      expect(code, w.output()).toBe(0);
      expect(at - shutdownAt).toBeLessThan(5000);
      expect(w.output()).toContain('the main node ended the cluster (test done)');
      expect(w.output()).not.toContain(token);
    }
    expect(dt.cluster.isRunning()).toBe(false);

    const again = await clusterOf(1, { token });
    expect(await again.started).not.toBe(address);
    expect(dt.cluster.devices().map((d) => d.node)).toEqual([0, 1, 1]);
  });

  it('gives the workers the rendezvous store (in this process, reached over their sessions) where process groups meet', async () => {
    const workers: Child[] = [];
    const main = await MainNode.start({ workers: 2, joinTimeoutMs: 20_000, onListening: (a) => workers.push(startWorker(a), startWorker(a)) });
    try {
      for (const w of workers) await waitForOutput(w, /joined 127\.0\.0\.1:\d+ as node/); // printed once registered in the store
      expect(await main.store.add('nodes', 0)).toBe(2);
      const hosts = await Promise.all([main.store.get('node/1'), main.store.get('node/2')]);
      expect(hosts.map(String)).toEqual(main.nodes().map((n) => n.hostname));
      await main.store.set('from-main', 'hello');
      expect(String(await main.store.get('from-main'))).toBe('hello');
    } finally {
      await main.shutdown();
    }
    for (const w of workers) expect((await w.exited).code, w.output()).toBe(0);
  });

  it('takes a worker started from code (dt.cluster.runWorker), its token from DTORCH_CLUSTER_TOKEN', async () => {
    let worker: Child | undefined;
    await dt.cluster.start({ token, workers: 1, devices: ownCpu, joinTimeoutMs: 20_000, onListening: (a) => (worker = startNode(['tests/cluster/worker_program.mjs', a], { DTORCH_CLUSTER_TOKEN: token })) });
    await waitForOutput(worker!, /welcome 1/);
    expect(dt.cluster.devices().map((d) => d.device)).toEqual(['cpu:0', 'cpu:0', 'cpu:1']);
    await dt.cluster.shutdown('done from code');
    expect((await worker!.exited).code, worker!.output()).toBe(0);
    expect(worker!.output()).toContain('ended as node 1: done from code');
  });

  it('refuses a wrong token with a clear error on both sides, and never prints the token', async () => {
    const { started, workers } = await clusterOf(1, { token, workerToken: 'not-the-token-000', joinTimeoutMs: 4000 });
    const failure = await started.then(() => undefined, (e: unknown) => e as dt.DTorchError);
    expect(failure?.code).toBe('TIMEOUT');
    expect(failure?.message).toMatch(/0 of 1 workers joined .* refused: a worker from 127\.0\.0\.1:\d+: wrong token/);
    const { code } = await workers[0]!.exited;
    expect(code).toBe(1);
    expect(workers[0]!.output()).toMatch(/^error: dtorch worker: the main node at 127\.0\.0\.1:\d+ refused the token \(wrong token: give the main node's token \(--token-file\)\); give its token with --token-file\n$/);
    for (const text of [workers[0]!.output(), failure!.message]) {
      expect(text).not.toContain(token);
      expect(text).not.toContain('not-the-token-000');
    }
  });

  it('notices a worker killed with SIGKILL within 5 s, naming it, and rejects a wait on it', async () => {
    const { started, workers } = await clusterOf(2);
    await started;
    const lost: dt.DTorchError[] = [];
    dt.cluster.onNodeLost((e) => lost.push(e));
    const victim = dt.cluster.nodes()[0]!;
    const victimProcess = workers.find((w) => w.process.pid === victim.pid)!;
    const killedAt = Date.now();
    victimProcess.process.kill('SIGKILL');
    const barrier = dt.cluster.barrier(30_000).then(() => undefined, (e: unknown) => e as dt.DTorchError);
    const err = await barrier;
    expect(Date.now() - killedAt).toBeLessThan(5000);
    expect(err?.code).toBe('NODE_LOST');
    expect(err?.message).toContain(`lost node ${victim.node} (${victim.hostname} pid ${victim.pid}`);
    expect(lost.map((e) => e.code)).toEqual(['NODE_LOST']);
    expect(dt.cluster.nodes().map((n) => n.alive)).toEqual([false, true]);
    expect(dt.cluster.devices().map((d) => d.node)).toEqual([0, 2, 2]);
    await dt.cluster.barrier(5000); // the live node still answers
  });

  it.each([
    { what: 'killed, idle', args: [], ready: /joined/, signal: 'SIGKILL' as const },
    { what: 'killed, with seconds of work queued on it', args: ['busy'], ready: /busy/, signal: 'SIGKILL' as const },
    { what: 'stopped (SIGSTOP), idle', args: [], ready: /joined/, signal: 'SIGSTOP' as const },
    { what: 'stopped (SIGSTOP) in collectives with the worker', args: ['collective'], ready: /busy/, signal: 'SIGSTOP' as const },
  ])('ends a worker within 5 s of its main node being $what', async ({ args, ready, signal }) => {
    const main = startNode(['tests/cluster/main_program.mjs', ...args]);
    await waitForOutput(main, /listening 127\.0\.0\.1:\d+/, 15_000);
    const address = /listening (127\.0\.0\.1:\d+)/.exec(main.output())![1]!;
    const worker = startWorker(address);
    await waitForOutput(main, ready, 15_000);
    const killedAt = Date.now();
    main.process.kill(signal); // a stopped main node stays stopped until afterEach kills it
    const { code, at } = await within(`the worker's exit after ${signal}`, 15_000, worker.exited, [worker]);
    expect(code, worker.output()).toBe(1);
    expect(at - killedAt, worker.output()).toBeLessThan(5000);
    // 'cannot reach' when the kill came before the worker read its Welcome
    expect(worker.output()).toMatch(/error: dtorch worker: (lost|cannot reach) the main node at 127\.0\.0\.1:\d+/);
  });

  it('refuses an address beyond this host without a token, and other bad options, at the call', async () => {
    await expect(dt.cluster.start({ listen: '0.0.0.0:0' })).rejects.toThrow(/listening on 0\.0\.0\.0:0, beyond this host, needs a token/);
    await expect(dt.cluster.start({ listen: 'localhost' })).rejects.toThrow(/expected listen as host:port/);
    await expect(dt.cluster.start({ token: 'short' })).rejects.toThrow(/at least 8 characters/);
    await expect(dt.cluster.start({ workers: -1 })).rejects.toThrow(/non-negative integer for workers/);
    expect(dt.cluster.isRunning()).toBe(false);
    expect(() => dt.cluster.devices()).toThrow(/no cluster is running/);
    const w = startWorker('127.0.0.1:1');
    expect((await w.exited).code).toBe(1);
    expect(w.output()).toMatch(/^error: dtorch worker: cannot reach the main node at 127\.0\.0\.1:1/);
  });
});

describe('the control plane under malformed input', () => {
  // a valid Join, as the wire carries it
  const join = () =>
    encodeWorkerMessage({ join: { protocol: CONTROL_PROTOCOL, hostname: 'fuzz', pid: 1, dtorchVersion: '0', libtorchVersion: '0', devices: [{ kind: 'cpu', index: 0, name: '', totalMemory: 0 }] } });

  // xorshift: the same mutations every run
  function rng(seed: number) {
    let s = seed >>> 0 || 1;
    return () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), (s >>> 0) / 2 ** 32);
  }

  function mutate(bytes: Buffer, r: () => number): Buffer[] {
    const b = Buffer.from(bytes);
    switch (Math.floor(r() * 6)) {
      case 0: // flip a few bytes
        for (let i = 0; i < 1 + r() * 4; i++) b[Math.floor(r() * b.length)] = Math.floor(r() * 256);
        return [b];
      case 1: // truncated
        return [b.subarray(0, Math.floor(r() * b.length))];
      case 2: // random bytes
        return [Buffer.from(Array.from({ length: Math.floor(r() * 64) }, () => Math.floor(r() * 256)))];
      case 3: // garbage appended
        return [Buffer.concat([b, Buffer.from(Array.from({ length: 1 + Math.floor(r() * 16) }, () => Math.floor(r() * 256)))])];
      case 4: // replayed: the same Join twice on one session
        return [bytes, bytes];
      default: // a heartbeat or barrier answer before any Join
        return [encodeWorkerMessage(r() < 0.5 ? { heartbeat: { sequence: 1 } } : { arrived: { barrier: 1 } })];
    }
  }

  it('refuses 10,000 of them without a crash, and still takes a real worker afterwards', async () => {
    const main = await MainNode.start({ token });
    try {
      const raw = grpc.makeGenericClientConstructor(
        { Session: { path: '/dtorch.control.v1.Control/Session', requestStream: true, responseStream: true, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b } },
        'Control',
      );
      const client = new raw(main.address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { Session(m: grpc.Metadata): grpc.ClientDuplexStream<Buffer, Buffer> };
      const metadata = new grpc.Metadata();
      metadata.set(TOKEN_METADATA, token);
      const r = rng(20261201);
      const good = join();
      let sent = 0;
      const one = (messages: Buffer[]) =>
        new Promise<void>((resolve) => {
          const call = client.Session(metadata);
          const done = () => {
            clearTimeout(timer);
            call.cancel();
            resolve();
          };
          const timer = setTimeout(done, 2000); // a message that decodes to a valid Join is welcomed: end it ourselves
          call.on('data', () => done());
          call.on('error', () => done());
          call.on('end', () => done());
          for (const m of messages) call.write(m);
          sent += messages.length;
        });
      // each refusal is logged as a warning: seen here for the first batch, then counted
      const warnings: string[] = [];
      const spy = vi.spyOn(console, 'error').mockImplementation((line: string) => void warnings.push(line));
      try {
        for (let i = 0; i < 10_000; i += 50) await Promise.all(Array.from({ length: 50 }, () => one(mutate(good, r))));
      } finally {
        spy.mockRestore();
      }
      client.close();
      expect(warnings.filter((w) => /cluster: refused |sent Join twice/.test(w)).length).toBe(main.refused);
      expect(warnings.some((w) => /cluster: refused a malformed message from a worker/.test(w))).toBe(true);
      expect(warnings.some((w) => /sent Join twice \(a replayed or mixed-up session\)/.test(w))).toBe(true);
      expect(warnings.some((w) => /refused a worker from .*: the first message must be Join/.test(w))).toBe(true);
      expect(sent).toBeGreaterThanOrEqual(10_000);
      expect(main.refused, 'most mutations are refused (a flip can leave a valid Join, which is welcomed)').toBeGreaterThan(8000);

      // still serving: a real worker joins and leaves
      const worker = startWorker(main.address, { token });
      const deadline = Date.now() + 15_000;
      while (!main.nodes().some((n) => n.pid === worker.process.pid && n.alive)) {
        if (Date.now() > deadline) throw new Error(`the worker did not join after the fuzzing:\n${worker.output()}`);
        await sleep(50);
      }
      await main.barrier(5000).catch(() => undefined); // the fuzz sessions' nodes are gone or going
      await main.shutdown();
      expect((await worker.exited).code, worker.output()).toBe(0);
    } finally {
      await main.shutdown();
    }
  }, 120_000);
});
