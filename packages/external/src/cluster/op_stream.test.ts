import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as zmq from 'zeromq';
import { OpStreamClient, OpStreamServer, newOpStreamKey, type OpStreamReject } from './op_stream.js';
import { MessageType, decodeFrame, encodeFrame } from './op_stream_frame.js';
import { RejectLog } from './op_stream_socket.js';

// Everything a test opens, closed after it whatever happened.
const open: { close(): void }[] = [];
const track = <T extends { close(): void }>(socket: T): T => (open.push(socket), socket);
afterEach(() => {
  for (const socket of open.splice(0)) socket.close();
  vi.restoreAllMocks();
});

async function until(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const numbered = (i: number, extra = 0) => {
  const b = Buffer.alloc(4 + extra, i & 0xff);
  b.writeUInt32LE(i, 0);
  return b;
};

async function listen(options = {}) {
  return track(await OpStreamServer.listen(options));
}

function connect(server: OpStreamServer, key: Buffer, options = {}) {
  return track(OpStreamClient.connect({ host: '127.0.0.1', port: server.port, key, ...options }));
}

/** A raw DEALER admitted as `node` (its hello sent): for frames no OpStreamClient would send. */
function rawWorker(server: OpStreamServer, node: number, options: zmq.SocketOptions<zmq.Dealer> = {}) {
  const key = newOpStreamKey();
  server.admit(node, key);
  const dealer = track(new zmq.Dealer({ linger: 0, ...options }));
  dealer.connect(`tcp://127.0.0.1:${server.port}`);
  let next = 1n;
  const send = (frames: Buffer[]) => dealer.send(frames);
  void send(encodeFrame(MessageType.Hello, next++, [key]));
  return { dealer, send, reply: (payload: Buffer) => encodeFrame(MessageType.Reply, next++, [payload]), peek: () => next };
}

/** A raw ROUTER posing as the main node, and an OpStreamClient connected to it (its hello received). */
async function fakeMain() {
  const router = track(new zmq.Router({ linger: 0, mandatory: true })); // else a full peer's messages are dropped
  await router.bind('tcp://127.0.0.1:0');
  const port = Number(/:(\d+)$/.exec(router.lastEndpoint!)![1]);
  const client = track(OpStreamClient.connect({ host: '127.0.0.1', port, key: newOpStreamKey() }));
  const [id] = await router.receive();
  let next = 1n;
  return {
    client,
    send: (frames: Buffer[]) => router.send([id!, ...frames]),
    segment: (payload: Buffer) => encodeFrame(MessageType.Segment, next++, [payload]),
  };
}

const errorLines = () => vi.spyOn(console, 'error').mockImplementation(() => undefined);

describe('OpStreamServer and OpStreamClient', () => {
  it('sends 10,000 segments to each of two workers in order, and their replies come back in order', async () => {
    const server = await listen();
    const keys = [newOpStreamKey(), newOpStreamKey()];
    server.admit(1, keys[0]!);
    server.admit(2, keys[1]!);
    const clients = keys.map((key) => connect(server, key));
    const got: number[][] = [[], []];
    clients.forEach((client, c) => client.onMessage((payload) => got[c]!.push(payload.readUInt32LE(0))));
    const replies = new Map<number, number[]>([[1, []], [2, []]]);
    server.onMessage((node, payload) => replies.get(node)!.push(payload.readUInt32LE(0)));
    await Promise.all([server.connected(1), server.connected(2)]);
    const n = 10_000;
    const sent: Promise<boolean>[] = [];
    for (let i = 0; i < n; i++) for (const node of [1, 2]) sent.push(server.send(node, numbered(i * node, 16)));
    // generous bounds: what is checked is the order, and on a 2-core machine running every
    // package's tests at once 20,000 messages each way have taken more than 10 s
    await until('every segment', () => got[0]!.length === n && got[1]!.length === n, 40_000);
    expect((await Promise.all(sent)).every(Boolean)).toBe(true);
    expect(got[0]).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(got[1]).toEqual(Array.from({ length: n }, (_, i) => 2 * i));
    for (let i = 0; i < n; i++) clients.forEach((client, c) => void client.send([numbered(i), Buffer.from([c])]));
    await until('every reply', () => replies.get(1)!.length === n && replies.get(2)!.length === n, 40_000);
    expect(replies.get(1)).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(replies.get(2)).toEqual(replies.get(1));
  }, 90_000);

  it('waits for a worker that stops reading while another keeps up, and drops nothing of either', async () => {
    // ZeroMQ's ROUTER reports itself writable while any peer has room, so a send to the full one
    // fails with EAGAIN; that once dropped the slow worker as unreachable (a CI failure of the test above)
    const server = await listen({ sendHighWaterMark: 4 });
    const key = newOpStreamKey();
    server.admit(1, key);
    const fast = connect(server, key);
    const fastGot: number[] = [];
    fast.onMessage((payload) => fastGot.push(payload.readUInt32LE(0)));
    const slow = rawWorker(server, 2, { receiveHighWaterMark: 4, receiveTimeout: 5000 }); // reads nothing until told; a segment dropped fails its receive
    await Promise.all([server.connected(1), server.connected(2)]);
    const n = 400;
    const payload = (i: number) => numbered(i, 64 << 10); // 26 MB to the slow one: more than loopback's socket buffers hold
    const sent: Promise<boolean>[] = [];
    for (let i = 0; i < n; i++) for (const node of [1, 2]) sent.push(server.send(node, payload(i)));
    await until('the first segment to the fast worker', () => fastGot.length > 0);
    await new Promise((r) => setTimeout(r, 300)); // the slow worker's queue fills and sends to it wait
    const slowGot: number[] = [];
    for (let i = 0; i < n; i++) {
      const message = await slow.dealer.receive();
      const decoded = decodeFrame(message, [MessageType.Segment], 1 << 30);
      if (!decoded.ok) throw new Error(decoded.message);
      slowGot.push(decoded.frame.payload.readUInt32LE(0));
    }
    expect(slowGot).toEqual(Array.from({ length: n }, (_, i) => i));
    expect((await Promise.all(sent)).every(Boolean)).toBe(true);
    await until('every segment to the fast worker', () => fastGot.length === n);
    expect(fastGot).toEqual(Array.from({ length: n }, (_, i) => i));
  }, 30_000);

  it('holds what is sent before a worker connects and delivers it after its hello, in order', async () => {
    const server = await listen();
    const key = newOpStreamKey();
    server.admit(1, key);
    const sent = Array.from({ length: 100 }, (_, i) => server.send(1, [numbered(i), Buffer.from('segment')]));
    let connected = false;
    void server.connected(1).then(() => (connected = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(connected).toBe(false);
    const client = connect(server, key);
    const got: string[] = [];
    client.onMessage((payload) => got.push(payload.length === 0 ? 'empty' : `${payload.readUInt32LE(0)}:${payload.subarray(4).toString()}`));
    await until('the early segments', () => got.length === 100);
    expect(got).toEqual(Array.from({ length: 100 }, (_, i) => `${i}:segment`));
    expect(connected).toBe(true);
    expect(await Promise.all(sent)).toEqual(Array(100).fill(true));
    expect(await server.send(1, [])).toBe(true);
    await until('an empty segment', () => got.length === 101);
    expect(got[100]).toBe('empty');
  }, 15_000);

  it('refuses a worker with an unadmitted key: nothing it sends is delivered, and the key never reaches the log', async () => {
    const errors = errorLines();
    const server = await listen();
    const good = newOpStreamKey();
    server.admit(1, good);
    const rejects: OpStreamReject[] = [];
    server.onReject((r) => rejects.push(r));
    const delivered: number[] = [];
    server.onMessage((node) => delivered.push(node));
    const stranger = connect(server, newOpStreamKey());
    for (let i = 0; i < 20; i++) void stranger.send(numbered(i));
    await until('the refusals', () => rejects.length === 21);
    expect(rejects.every((r) => r.kind === 'unadmitted' && r.node === undefined)).toBe(true);
    expect(rejects[0]!.message).toContain('its hello carries no admitted key');
    const worker = connect(server, good);
    await server.connected(1);
    await worker.send(Buffer.from('ok'));
    await until('the admitted reply', () => delivered.length === 1);
    expect(delivered).toEqual([1]);
    const warned = errors.mock.calls.map(([line]) => String(line)).filter((l) => l.includes('op stream'));
    expect(warned).toHaveLength(1); // once per peer and kind; the rest at debug
    expect(warned[0]).toMatch(/\[dtorch warn\] op stream: dropped a message from an unadmitted peer .*no admitted key/);
    expect(warned[0]).not.toContain(good.toString('hex'));
  }, 15_000);

  it('logs a flood of garbage peers with 255-byte routing ids once, the id cut short, and tells every one to onReject', async () => {
    const errors = errorLines();
    const debug = vi.spyOn(console, 'debug').mockImplementation(() => undefined);
    const server = await listen();
    const rejects: OpStreamReject[] = [];
    server.onReject((r) => rejects.push(r));
    const peers = 100;
    for (let i = 0; i < peers; i++) {
      // a routing id of the peer's choosing, as long as ZeroMQ allows
      const garbage = track(new zmq.Dealer({ linger: 0, routingId: `peer-${i}-`.padEnd(255, 'z') }));
      garbage.connect(`tcp://127.0.0.1:${server.port}`);
      void garbage.send([Buffer.from('GET / HTTP/1.1')]);
    }
    await until('every garbage peer refused', () => rejects.length === peers);
    expect(rejects.every((r) => r.kind === 'unadmitted')).toBe(true);
    const warned = errors.mock.calls.map(([line]) => String(line)).filter((l) => l.includes('op stream'));
    expect(warned, warned.join('\n')).toHaveLength(1); // one line for the lot, within the minute
    expect(warned[0]).toMatch(/^\[dtorch warn\] op stream: dropped a message from an unadmitted peer \(routing id [0-9a-f]{16}\.\.\. \(255 bytes\)\): its first message is not a hello/);
    expect(warned[0]!.length).toBeLessThan(250);
    for (const line of [...warned, ...debug.mock.calls.map(([l]) => String(l))]) expect(line).not.toMatch(/7a7a7a7a7a7a7a7a7a7a/); // no whole id, at any level
  }, 15_000);

  it('logs a kind of drop again after its interval, with how many it held back', async () => {
    const errors = errorLines();
    const rejects = new RejectLog(100);
    const garbage = { kind: 'malformed' as const, message: 'garbage' };
    for (let i = 0; i < 5; i++) rejects.write(`peer ${i}`, garbage, 'unadmitted peers');
    rejects.write('node 2', garbage); // another group: its own budget
    await new Promise((r) => setTimeout(r, 150));
    rejects.write('peer 9', garbage, 'unadmitted peers');
    expect(errors.mock.calls.map(([l]) => String(l))).toEqual([
      '[dtorch warn] op stream: dropped a message from peer 0: garbage',
      '[dtorch warn] op stream: dropped a message from node 2: garbage',
      expect.stringMatching(/^\[dtorch warn\] op stream: dropped a message from peer 9: garbage \(and 4 more like it from unadmitted peers in the last 0 s, logged at debug\)$/),
    ]);
  });

  it('carries a 64 MiB payload both ways', async () => {
    const server = await listen();
    const key = newOpStreamKey();
    server.admit(1, key);
    const client = connect(server, key);
    const big = randomBytes(64 << 20);
    const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    let down: Buffer | undefined;
    let up: Buffer | undefined;
    client.onMessage((p) => (down = p));
    server.onMessage((_node, p) => (up = p));
    expect(await server.send(1, [big.subarray(0, 1 << 20), big.subarray(1 << 20)])).toBe(true);
    await until('the segment', () => down !== undefined, 20_000);
    expect(down!.length).toBe(big.length);
    expect(digest(down!)).toBe(digest(big));
    await client.send(big);
    await until('the reply', () => up !== undefined, 20_000);
    expect(digest(up!)).toBe(digest(big));
  }, 30_000);

  it('drops replayed, duplicated, skipped, truncated and garbage frames from a raw DEALER, logs why, and goes on', async () => {
    const errors = errorLines();
    const server = await listen();
    const rejects: OpStreamReject[] = [];
    server.onReject((r) => rejects.push(r));
    const got: string[] = [];
    server.onMessage((node, p) => got.push(`${node}:${p.toString()}`));
    const raw = rawWorker(server, 3);
    await server.connected(3);
    const first = raw.reply(Buffer.from('first'));
    await raw.send(first);
    await raw.send(first); // duplicated
    await raw.send(encodeFrame(MessageType.Hello, 1n, [newOpStreamKey()])); // a second hello
    await raw.send([first[0]!.subarray(0, 20), first[1]!]); // truncated header
    await raw.send([first[0]!, first[1]!.subarray(0, 3)]); // truncated payload
    await raw.send([Buffer.from('not an op stream message at all, no')]); // garbage
    const bad = Buffer.from(first[0]!);
    bad.writeUInt16LE(2, 4);
    await raw.send([bad, first[1]!]); // another version
    const skipped = encodeFrame(MessageType.Reply, raw.peek() + 5n, [Buffer.from('skip')]);
    await raw.send(skipped);
    const corrupt = raw.reply(Buffer.from('second'));
    const flipped = Buffer.from(corrupt[1]!);
    flipped[0]! ^= 1;
    await raw.send([corrupt[0]!, flipped]); // a flipped payload byte: the checksum
    await raw.send(encodeFrame(MessageType.Reply, raw.peek() - 1n, [Buffer.from('second')])); // the number the corrupt one had, intact
    await until('the second reply', () => got.length === 2);
    expect(got).toEqual(['3:first', '3:second']);
    expect(rejects.map((r) => r.kind)).toEqual(['sequence', 'type', 'truncated', 'length', 'malformed', 'version', 'sequence', 'checksum']);
    expect(rejects.every((r) => r.node === 3)).toBe(true);
    expect(rejects[0]!.message).toBe('sequence number 2, expected 3 (replayed or duplicated)');
    expect(rejects[6]!.message).toBe('sequence number 8, expected 3 (skipped: a message was lost)');
    const warned = errors.mock.calls.map(([line]) => String(line));
    expect(warned).toHaveLength(7); // the second 'sequence' at debug
    expect(warned[0]).toBe('[dtorch warn] op stream: dropped a message from node 3: sequence number 2, expected 3 (replayed or duplicated)');
    expect(warned.join('\n')).toContain('a header of 20 bytes, expected 32');
    expect(warned.join('\n')).toContain('framing version 2, this build speaks 1');
    // a peer whose first message is not a hello is never accepted, not even by a later good hello
    const key = newOpStreamKey();
    server.admit(4, key);
    const stranger = track(new zmq.Dealer({ linger: 0 }));
    stranger.connect(`tcp://127.0.0.1:${server.port}`);
    await stranger.send(encodeFrame(MessageType.Reply, 1n, [Buffer.from('x')]));
    await stranger.send(encodeFrame(MessageType.Hello, 1n, [key]));
    await until('the stranger refused', () => rejects.length === 10);
    expect(rejects.slice(8).map((r) => [r.kind, r.message])).toEqual([
      ['unadmitted', 'its first message is not a hello (message type 3, expected 1); nothing more from it is accepted'],
      ['unadmitted', 'its first message was refused'],
    ]);
    expect(got).toHaveLength(2);
  }, 15_000);

  it('drops a payload over maxMessageBytes, and ZeroMQ cuts a peer whose frame is over it', async () => {
    const server = await listen({ maxMessageBytes: 1000 });
    const rejects: OpStreamReject[] = [];
    server.onReject((r) => rejects.push(r));
    const raw = rawWorker(server, 1);
    await server.connected(1);
    await raw.send(encodeFrame(MessageType.Reply, raw.peek(), [Buffer.alloc(600), Buffer.alloc(600)]));
    await until('the refusal', () => rejects.length === 1);
    expect(rejects[0]).toMatchObject({ kind: 'size', message: 'a payload of 1200 bytes, over maxMessageBytes 1000' });
    expect(() => server.send(1, Buffer.alloc(1001))).toThrow('OpStreamServer.send: a payload of 1001 bytes is over maxMessageBytes 1000');
    const key = newOpStreamKey();
    server.admit(2, key);
    const client = connect(server, key, { maxMessageBytes: 4000 });
    await server.connected(2);
    const got: number[] = [];
    server.onMessage((node) => got.push(node));
    await client.send(Buffer.alloc(2000)); // the server's ZeroMQ disconnects it: never delivered
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual([]);
  }, 15_000);

  it('drops bad segments on the worker side too (a raw ROUTER posing as the main node) and goes on', async () => {
    errorLines();
    const main = await fakeMain();
    const rejects: OpStreamReject[] = [];
    main.client.onReject((r) => rejects.push(r));
    const got: string[] = [];
    main.client.onMessage((p) => got.push(p.toString()));
    const one = main.segment(Buffer.from('one'));
    await main.send(one);
    await main.send(one); // replayed
    await main.send(encodeFrame(MessageType.Reply, 2n, [Buffer.from('a reply, the wrong way')]));
    const magic = Buffer.from(one[0]!);
    magic.write('XTOS', 0, 'latin1');
    await main.send([magic, one[1]!]);
    await main.send([Buffer.alloc(0)]);
    await main.send(main.segment(Buffer.from('two')));
    await until('the second segment', () => got.length === 2);
    expect(got).toEqual(['one', 'two']);
    expect(rejects.map((r) => r.kind)).toEqual(['sequence', 'type', 'magic', 'truncated']);
  }, 15_000);

  const FUZZED = 10_000;

  /** Mutates a valid message: byte flips, a frame cut short or extended, the last frame dropped or one added. */
  function mutate(frames: Buffer[], random: () => number): Buffer[] {
    const out = frames.map((f) => Buffer.from(f));
    const pick = (n: number) => Math.floor(random() * n);
    const at = pick(out.length);
    const frame = out[at]!;
    switch (pick(4)) {
      case 0: // 1 to 4 bytes flipped
        if (frame.length === 0) out[at] = Buffer.from([1 + pick(255)]);
        else for (let i = 1 + pick(4); i > 0; i--) frame[pick(frame.length)]! ^= 1 + pick(255);
        break;
      case 1: // cut short
        out[at] = frame.subarray(0, pick(frame.length));
        break;
      case 2: // extended
        out[at] = Buffer.concat([frame, randomBytes(1 + pick(40))]);
        break;
      default: // the last frame dropped (unless empty: an empty frame is no change), or a frame added
        if (out.length > 1 && out[out.length - 1]!.length > 0) out.pop();
        else out.push(randomBytes(1 + pick(16)));
    }
    return out;
  }

  function seeded(seed: number): () => number {
    return () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  }

  const same = (a: Buffer[], b: Buffer[]) => a.length === b.length && a.every((f, i) => f.equals(b[i]!));

  it(`never delivers one of ${FUZZED} mutated replies, nor crashes, and delivers the intact ones between them`, async () => {
    const errors = errorLines();
    const server = await listen();
    const raw = rawWorker(server, 1);
    await server.connected(1);
    let rejected = 0;
    server.onReject(() => rejected++);
    const got: Buffer[] = [];
    server.onMessage((_n, p) => got.push(p));
    const random = seeded(7);
    const intact: Buffer[] = [];
    for (let m = 0; m < FUZZED; m++) {
      const payload = randomBytes(Math.floor(random() * 64));
      const valid = encodeFrame(MessageType.Reply, raw.peek(), [payload.subarray(0, payload.length >> 1), payload.subarray(payload.length >> 1)]);
      let bad = mutate(valid, random);
      while (same(bad, valid)) bad = mutate(valid, random);
      await raw.send(bad);
      await raw.send(raw.reply(payload)); // intact, with the number the mutated one had
      intact.push(payload);
    }
    await until('every intact reply', () => got.length === intact.length, 20_000);
    expect(rejected).toBe(FUZZED);
    expect(got.every((p, i) => p.equals(intact[i]!))).toBe(true);
    expect(errors.mock.calls.length).toBeLessThanOrEqual(9); // the first of each kind; the rest at debug
  }, 60_000);

  it(`never delivers one of ${FUZZED} mutated segments on the worker side either`, async () => {
    errorLines();
    const main = await fakeMain();
    let rejected = 0;
    main.client.onReject(() => rejected++);
    const got: Buffer[] = [];
    main.client.onMessage((p) => got.push(p));
    const random = seeded(11);
    const intact: Buffer[] = [];
    for (let m = 0; m < FUZZED; m++) {
      const payload = randomBytes(1 + Math.floor(random() * 64));
      const valid = main.segment(payload);
      let bad = mutate(valid, random);
      while (same(bad, valid)) bad = mutate(valid, random);
      await main.send(bad);
      await main.send(valid); // the same number, intact, after the mutated one
      intact.push(payload);
    }
    await until('every intact segment', () => got.length === intact.length, 20_000);
    expect(rejected).toBe(FUZZED);
    expect(got.every((p, i) => p.equals(intact[i]!))).toBe(true);
  }, 60_000);

  it('closes both ends in under a second with the peer gone and messages still queued', async () => {
    const server = await listen({ sendHighWaterMark: 10 });
    const key = newOpStreamKey();
    server.admit(1, key);
    server.admit(2, newOpStreamKey()); // never connects: its messages wait in memory
    const client = connect(server, key, { sendHighWaterMark: 10, receiveHighWaterMark: 10 });
    await server.connected(1);
    const waiting = expect(server.connected(2)).rejects.toMatchObject({ code: 'NETWORK_ERROR', message: 'OpStreamServer: the server was closed' });
    const early = server.send(2, Buffer.alloc(10));
    const segments = Array.from({ length: 5000 }, () => server.send(1, Buffer.alloc(1024))); // the client reads none
    let started = Date.now();
    client.close();
    const replies = Array.from({ length: 100 }, () => Buffer.alloc(8));
    expect(() => client.send(replies[0]!)).toThrow('OpStreamClient.send: the client was closed');
    expect(Date.now() - started).toBeLessThan(1000);
    started = Date.now();
    server.close();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await early).toBe(false);
    await waiting;
    const outcome = await Promise.all(segments);
    expect(outcome.includes(false)).toBe(true); // those still queued were dropped
    expect(Date.now() - started).toBeLessThan(1000);
    // a client whose main node hangs, with replies blocked behind its high-water mark. The peer is a
    // TCP listener that never speaks ZeroMQ: a connect to the closed server's port could land on
    // itself (TCP simultaneous open on a free local port) or on a port another test bound since,
    // and then every reply would be taken.
    const held: Socket[] = [];
    const silent = createServer((socket) => void held.push(socket));
    await new Promise<void>((ready) => silent.listen(0, '127.0.0.1', ready));
    const silentPort = (silent.address() as { port: number }).port;
    const orphan = track(OpStreamClient.connect({ host: '127.0.0.1', port: silentPort, key, sendHighWaterMark: 5 }));
    const stuck = Array.from({ length: 50 }, () => orphan.send(Buffer.alloc(16)));
    await new Promise((r) => setTimeout(r, 50));
    started = Date.now();
    orphan.close();
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await Promise.all(stuck)).includes(false)).toBe(true);
    server.close(); // twice is fine
    orphan.close();
    for (const socket of held) socket.destroy();
    silent.close();
  }, 10_000);

  it('forget() drops a node: its unsent segments, its later replies, and its key', async () => {
    const server = await listen();
    const key = newOpStreamKey();
    server.admit(1, key);
    const client = connect(server, key);
    await server.connected(1);
    const rejects: OpStreamReject[] = [];
    server.onReject((r) => rejects.push(r));
    const got: Buffer[] = [];
    server.onMessage((_n, p) => got.push(p));
    server.forget(1);
    expect(() => server.send(1, Buffer.alloc(1))).toThrow('OpStreamServer.send: node 1 was not admitted');
    await client.send(Buffer.from('late'));
    await until('the refusal', () => rejects.length === 1);
    expect(rejects[0]!.kind).toBe('unadmitted');
    expect(got).toEqual([]);
    server.admit(1, key); // admitted again: a new connection may say hello with the same key
    const again = connect(server, key);
    await server.connected(1);
    await again.send(Buffer.from('back'));
    await until('the reply', () => got.length === 1);
    expect(got[0]!.toString()).toBe('back');
  }, 10_000);

  it('checks its arguments at the call', async () => {
    await expect(OpStreamServer.listen({ port: 70000 })).rejects.toThrow('Expected integer in [0, 65535] for OpStreamServer.listen port but received 70000 of type number');
    await expect(OpStreamServer.listen({ max_message_bytes: 1 } as never)).rejects.toThrow(/Unknown option "max_message_bytes" in OpStreamServer.listen options \(did you mean maxMessageBytes\?/);
    const server = await listen();
    expect(() => server.admit(1, Buffer.alloc(16))).toThrow('Expected 32-byte Buffer for OpStreamServer.admit key but received Buffer of type object');
    expect(() => server.admit(-1, newOpStreamKey())).toThrow('Expected non-negative integer for OpStreamServer.admit node');
    server.admit(1, newOpStreamKey());
    expect(() => server.send(2, Buffer.alloc(1))).toThrow('OpStreamServer.send: node 2 was not admitted');
    expect(() => server.send(1, 'text' as never)).toThrow('Expected Buffer or array of Buffers for OpStreamServer.send payload but received "text" of type string');
    expect(() => server.onMessage(undefined as never)).toThrow('Expected function for OpStreamServer.onMessage listener');
    expect(() => OpStreamClient.connect({ host: '127.0.0.1', port: server.port, key: Buffer.alloc(31) })).toThrow('Expected 32-byte Buffer for OpStreamClient.connect key');
    expect(() => OpStreamClient.connect({ host: '', port: server.port, key: newOpStreamKey() })).toThrow('Expected host name or address for OpStreamClient.connect host');
    server.close();
    expect(() => server.admit(3, newOpStreamKey())).toThrow('OpStreamServer.admit: the server was closed');
  }, 10_000);
});
