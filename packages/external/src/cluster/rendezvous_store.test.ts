import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { RendezvousStore } from './rendezvous_store.js';

describe('RendezvousStore (c10d TCPStore)', () => {
  it('serves and connects on 127.0.0.1: set, get waits for a key, add counts', async () => {
    const server = RendezvousStore.serve('127.0.0.1', 0, 5000);
    const client = await RendezvousStore.connect('127.0.0.1', server.port, 5000);
    try {
      expect(client.port).toBe(server.port);
      const pending = server.get('late'); // waits until the client sets it
      await client.set('late', 'value');
      expect(String(await pending)).toBe('value');
      await client.set('bytes', new Uint8Array([0, 1, 255]));
      expect([...(await server.get('bytes'))]).toEqual([0, 1, 255]);
      expect(await client.add('count', 2)).toBe(2);
      expect(await server.add('count', 3)).toBe(5);
      expect(await client.add('count', 0)).toBe(5);
    } finally {
      client.close();
      server.close();
    }
  });

  it('rejects a key nobody sets with TIMEOUT after the timeout, and an unreachable store with NETWORK_ERROR', async () => {
    const server = RendezvousStore.serve('127.0.0.1', 0, 300);
    try {
      const started = Date.now();
      const err = (await server.get('never').then(() => undefined, (e: unknown) => e)) as { code: string; message: string };
      expect(err).toMatchObject({ code: 'TIMEOUT' });
      expect(err.message).toContain('rendezvous store get never');
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      server.close();
    }
    await expect(RendezvousStore.connect('127.0.0.1', 1, 300)).rejects.toMatchObject({ code: 'NETWORK_ERROR', message: expect.stringContaining('rendezvous store at 127.0.0.1:1') });
  });

  it('lets the process exit while a call still waits (a worker whose main node died must end)', () => {
    const server = RendezvousStore.serve('127.0.0.1', 0, 60_000);
    try {
      const script = `
        import { RendezvousStore } from '@dtorch/external';
        const store = await RendezvousStore.connect('127.0.0.1', ${server.port}, 60000);
        void store.get('never-set'); // waits up to 60 s on its own thread
        setTimeout(() => process.exit(3), 100);`;
      const started = Date.now();
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
      expect(r.status, r.stderr).toBe(3);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      server.close();
    }
  });

  it('checks its arguments at the call, and refuses use after close', () => {
    expect(() => RendezvousStore.serve('', 0)).toThrow(/expected a host name/);
    expect(() => RendezvousStore.serve('127.0.0.1', 70000)).toThrow(/port from 0 to 65535/);
    expect(() => RendezvousStore.serve('127.0.0.1', 0, 0)).toThrow(/at least 1 ms/);
    const server = RendezvousStore.serve('127.0.0.1', 0, 1000);
    server.close();
    server.close();
    expect(() => server.port).toThrow(/RendezvousStore.port: the store was closed/);
  });
});
