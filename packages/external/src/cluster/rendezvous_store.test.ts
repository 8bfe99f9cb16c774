import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { RendezvousStore, type StoreRequest } from './rendezvous_store.js';

// A relayed store whose every call the local `store` answers for node `origin`, as the main node
// answers a worker's over its session (here without the network in between).
function relayTo(store: RendezvousStore, origin: number, timeoutMs = 5000): { relay: RendezvousStore; sent: StoreRequest[] } {
  const sent: StoreRequest[] = [];
  const relay: RendezvousStore = RendezvousStore.relay((id, request) => {
    sent.push(request);
    void store.answer(origin, request).then((reply) => relay.reply(id, reply));
  }, timeoutMs);
  return { relay, sent };
}

const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as { code: string; message: string });

describe('RendezvousStore', () => {
  it('keeps keys in this process: set, get waits for a key, add counts, check looks', async () => {
    const store = RendezvousStore.local(5000);
    try {
      const pending = store.get('late'); // waits until it is set
      await store.set('late', 'value');
      expect(String(await pending)).toBe('value');
      await store.set('bytes', new Uint8Array([0, 1, 255]));
      expect([...(await store.get('bytes'))]).toEqual([0, 1, 255]);
      expect(await store.add('count', 2)).toBe(2);
      expect(await store.add('count', 0)).toBe(2);
      expect(await store.check(['late', 'count'])).toBe(true);
      expect(await store.check(['late', 'absent'])).toBe(false);
    } finally {
      store.close();
    }
  });

  it('relays calls to the process that holds the store, many at once, each answered by its own reply', async () => {
    const store = RendezvousStore.local(5000);
    const { relay, sent } = relayTo(store, 1);
    try {
      const waiting = [relay.get('a'), relay.get('b'), relay.get('c')]; // in flight together
      await store.set('c', 'C');
      await relay.set('b', 'B');
      await store.set('a', 'A');
      expect((await Promise.all(waiting)).map(String)).toEqual(['A', 'B', 'C']);
      expect(await relay.add('n', 5)).toBe(5);
      expect(await store.add('n', 1)).toBe(6);
      expect(await relay.check(['a', 'n'])).toBe(true);
      expect(sent.map((r) => r.op)).toEqual(expect.arrayContaining(['get', 'set', 'add', 'check']));
      // a get asks the other side to wait at most the relay's timeout (the three left on threads of their own, in any order)
      const gets = sent.filter((r) => r.op === 'get');
      expect(gets.map((r) => r.keys[0]).sort()).toEqual(['a', 'b', 'c']);
      expect(gets.every((r) => r.timeoutMs === 5000)).toBe(true);
    } finally {
      relay.close();
      store.close();
    }
  });

  it('answers a malformed relayed call with INVALID_ARGUMENT, never throwing', async () => {
    const store = RendezvousStore.local(5000);
    const call = (request: Partial<StoreRequest>) =>
      store.answer(1, { op: 'get', keys: [], value: new Uint8Array(0), expected: new Uint8Array(0), delta: 0, timeoutMs: 100, ...request });
    try {
      expect(await call({ op: 'get', keys: [] })).toMatchObject({ errorCode: 'INVALID_ARGUMENT', errorMessage: expect.stringMatching(/get names one key, not 0/) });
      expect(await call({ op: 'wait', keys: ['k'], timeoutMs: 0 })).toMatchObject({ errorCode: 'INVALID_ARGUMENT', errorMessage: expect.stringMatching(/a timeout of 0 ms/) });
      expect(await call({ op: 'set', keys: ['x'.repeat(5000)] })).toMatchObject({ errorCode: 'INVALID_ARGUMENT', errorMessage: expect.stringMatching(/a key of 5000 bytes/) });
      expect(await call({ op: 'get', keys: ['never'], timeoutMs: 200 })).toMatchObject({ errorCode: 'TIMEOUT' });
      expect(() => store.answer(1, { op: 'nope' } as never)).toThrow(/unknown op nope/); // a request of the wrong shape, at the call
      expect(await call({ op: 'add', keys: ['k'], delta: 3 })).toMatchObject({ errorCode: '', number: 3 });
    } finally {
      store.close();
    }
  });

  it('ends a relayed wait at once when its node is forgotten or the store closes, and a relay closed under a call', async () => {
    const store = RendezvousStore.local(60_000);
    const { relay } = relayTo(store, 2, 60_000);
    try {
      let started = Date.now();
      const forgotten = failure(relay.get('never'));
      await new Promise((r) => setTimeout(r, 200));
      store.forget(2); // the session of node 2 ended
      const err = await forgotten;
      expect(Date.now() - started).toBeLessThan(3000);
      expect(err).toMatchObject({ code: 'NETWORK_ERROR', message: expect.stringContaining('the caller\'s session ended') });
      expect(await failure(relay.add('later', 1))).toMatchObject({ code: 'NETWORK_ERROR', message: expect.stringContaining('no longer answers node 2') });

      // a relay whose other side never answers: its close fails the call at once, naming why
      const silent = RendezvousStore.relay(() => undefined, 60_000);
      started = Date.now();
      const waiting = failure(silent.get('k'));
      await new Promise((r) => setTimeout(r, 100));
      silent.close('the session ended');
      expect(await waiting).toMatchObject({ code: 'NETWORK_ERROR', message: expect.stringContaining('the session ended') });
      expect(Date.now() - started).toBeLessThan(3000);

      // a send that throws fails its call at once
      const broken = RendezvousStore.relay(() => {
        throw new Error('no session');
      }, 60_000);
      expect(await failure(broken.set('k', 'v'))).toMatchObject({ code: 'NETWORK_ERROR', message: expect.stringContaining('no session') });
      broken.close();
    } finally {
      relay.close();
      store.close();
    }
  });

  it('times a relayed call out when no answer comes, and fails to reach a port nobody serves', async () => {
    const silent = RendezvousStore.relay(() => undefined, 200);
    try {
      const started = Date.now();
      expect(await failure(silent.add('k', 1))).toMatchObject({ code: 'TIMEOUT', message: expect.stringContaining('no answer from the main node') });
      expect(Date.now() - started).toBeLessThan(10_000); // 200 ms and the margin for the answer's way
    } finally {
      silent.close();
    }
    await expect(RendezvousStore.connect('127.0.0.1', 1, 300)).rejects.toMatchObject({ code: 'NETWORK_ERROR', message: expect.stringContaining('rendezvous store at 127.0.0.1:1') });
  });

  it('lets the process exit while a relayed call still waits (a worker whose main node died must end)', () => {
    const script = `
      import { RendezvousStore } from '@dtorch/external';
      const store = RendezvousStore.relay(() => undefined, 60000);
      void store.get('never-set'); // waits up to 60 s on its own thread
      setTimeout(() => process.exit(3), 100);`;
    const started = Date.now();
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status, r.stderr).toBe(3);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('checks its arguments at the call, and refuses use after close', async () => {
    expect(() => RendezvousStore.local(0)).toThrow(/at least 1 ms/);
    expect(() => RendezvousStore.relay('send' as never)).toThrow(/expected send as a function/);
    await expect(RendezvousStore.connect('', 1)).rejects.toThrow(/expected a host name/);
    await expect(RendezvousStore.connect('127.0.0.1', 70000)).rejects.toThrow(/port from 0 to 65535/);
    const store = RendezvousStore.local(1000);
    expect(() => store.reply(1, { errorCode: '', errorMessage: '', value: new Uint8Array(0), number: 0 })).toThrow(/only a relay store has it \(this one is local\)/);
    store.close();
    store.close();
    expect(() => store.handle).toThrow(/RendezvousStore.handle: the store was closed/);
  });
});
