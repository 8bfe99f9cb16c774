// The op stream's payloads (native/core/cluster/stream_codec, docs/cluster.md "The op stream:
// payloads") without a network: this process's engine joins a cluster as the main node with a
// made-up worker (node 1, holding cpu:1 and cpu:2), records a program on a mesh of that worker's
// devices and takes what it would stream; then a child process joins as node 1 and applies those
// payloads as a worker does, answering the reads. 10,000 mutated, truncated and extended payloads
// are each refused with PROTOCOL_ERROR (and a refusal the main node hears of) or taken whole,
// never a crash; the engine works afterwards. The main node's side takes 10,000 mutated answers.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';
import { Gen } from '../distributed/random.js';
import { startNode } from './cluster_processes.js';

const cluster = engine().cluster;
const devices = [
  { kind: 'cpu' as const, index: 0, node: 0, localIndex: 0 },
  { kind: 'cpu' as const, index: 1, node: 1, localIndex: 0 },
  { kind: 'cpu' as const, index: 2, node: 1, localIndex: 1 },
];
const Type = { devices: 1, mesh: 2, segment: 3, read: 16, synced: 17, rejected: 18 };

// What the main node streams for a small program on node 1's devices: the reads it records wait
// for node 1, and fail (SHUTDOWN) when the cluster is left.
function streamedProgram(): { snapshot: Buffer[]; stream: Buffer[]; reads: Promise<unknown>[] } {
  cluster.join(0, 1, undefined, devices, () => undefined, '');
  try {
    return record();
  } finally {
    cluster.leave('test: the main node leaves');
  }
}

function record(): { snapshot: Buffer[]; stream: Buffer[]; reads: Promise<unknown>[] } {
  const mesh = new dt.DeviceMesh('cpu', [1, 2], ['tp']);
  const x = dt.tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], mesh, placements: [dt.Shard(1)] });
  const w = dt.randn([3, 4], { seed: 3, mesh, placements: [dt.Shard(0)] });
  const y = x.matmul(w).redistribute([dt.Replicate()]).relu().add(1);
  const z = y.softmax(-1).sum(0);
  const reads = [z.data(), y.data()].map((p) => p.catch((err: unknown) => err));
  const sync = dt.sync().catch((err: unknown) => err);
  dt.dispose([x, w, y, z]);
  engine().flush();
  const stream = cluster.takeOutgoing();
  const snapshot = cluster.snapshot();
  expect(cluster.stats().remoteWaits, 'two reads and a sync wait for node 1').toBe(3);
  return { snapshot, stream, reads: [...reads, sync] };
}

function mutate(g: Gen, payload: Buffer): Buffer {
  const bytes = Buffer.from(payload);
  switch (bytes.length === 0 ? 2 : g.int(0, 3)) {
    case 0: // flip bytes
      for (let k = g.int(1, 4); k > 0; k--) {
        const at = g.int(0, bytes.length - 1);
        bytes.writeUInt8(bytes.readUInt8(at) ^ (1 << g.int(0, 7)), at);
      }
      return bytes;
    case 1: // truncate
      return bytes.subarray(0, g.int(0, bytes.length - 1));
    case 2: // extend
      return Buffer.concat([bytes, Buffer.from(Array.from({ length: g.int(1, 16) }, () => g.int(0, 255)))]);
    default: // overwrite a little-endian field with a large or negative number
      if (bytes.length >= 12) bytes.writeUInt32LE(g.pick([0xffffffff, 0x7fffffff, 65536, 0]), g.int(0, bytes.length - 4));
      return bytes;
  }
}

afterEach(() => cluster.leave('test done'));

describe('op stream payloads', () => {
  it('encode a program on another node as devices, meshes and segments; its waits fail when the cluster is left', async () => {
    const { snapshot, stream, reads } = streamedProgram();
    expect(snapshot.map((p) => cluster.decode(p).type)).toEqual([Type.devices, ...snapshot.slice(1).map(() => Type.mesh)]);
    const types = stream.map((p) => cluster.decode(p).type);
    expect(types).toContain(Type.segment);
    expect(types[0], 'the mesh goes out before the segments that use it').toBe(Type.mesh);
    for (const err of await Promise.all(reads)) {
      expect((err as dt.DTorchError).code).toBe('ENGINE_SHUT_DOWN');
      expect((err as Error).message).toContain('test: the main node leaves');
    }
  });

  it('a worker process applies them and answers the reads; it refuses each of 10,000 mutations with PROTOCOL_ERROR or takes it whole, never a crash', async () => {
    const { snapshot, stream } = streamedProgram();
    // the snapshot (every device and mesh) was taken after the stream: of the stream, the segments
    const program = [...snapshot, ...stream.filter((p) => cluster.decode(p).type === Type.segment)];
    const g = new Gen(20261201);
    const mutations = Array.from({ length: 10_000 }, () => mutate(g, g.pick(program)));
    const file = join(mkdtempSync(join(tmpdir(), 'dtorch-payloads-')), 'payloads.json');
    const base64 = (list: Buffer[]) => list.map((p) => p.toString('base64'));
    writeFileSync(file, JSON.stringify({ program: base64(program), mutations: base64(mutations) }));
    const child = startNode([fileURLToPath(new URL('./apply_payloads_program.mjs', import.meta.url)), file]);
    const timer = setTimeout(() => child.process.kill('SIGKILL'), 45_000);
    const { code, signal } = await child.exited;
    clearTimeout(timer);
    expect(signal, `the worker process did not finish within 45 s; it printed:\n${child.output()}`).toBeNull();
    expect(code, child.output()).toBe(0);
    const result = JSON.parse(child.output().trim().split('\n').at(-1)!) as { answers: number[]; refused: number; taken: number; otherCodes: string[]; rejectedTold: number; after: number[] };
    // rank 0 of the mesh is this worker's: it answers both reads and the sync, and refuses nothing
    expect(result.answers.sort()).toEqual([Type.read, Type.read, Type.synced]);
    expect(result.otherCodes, 'every refusal is a PROTOCOL_ERROR').toEqual([]);
    expect(result.refused).toBeGreaterThan(9000);
    expect(result.refused + result.taken).toBe(10_000);
    // each refusal told the main node (a kRejected payload), whose waits on this node then fail
    expect(result.rejectedTold).toBe(result.refused);
    expect(result.after, 'the engine works afterwards').toEqual([2, 4, 6]);
    console.log(`10,000 mutated payloads on a worker: ${result.refused} refused, ${result.taken} taken`);
  }, 60_000);

  it('the main node refuses a malformed answer with PROTOCOL_ERROR, and takes any of 10,000 mutations without a crash', () => {
    cluster.join(0, 3, undefined, devices, () => undefined, '');
    const g = new Gen(7);
    const answers = [Buffer.from('DTSM'), Buffer.alloc(0), Buffer.from([0x44, 0x54, 0x53, 0x4d, 1, 0, 16, 1, 0, 0, 0, 0, 0, 0, 0, 1, 5])];
    let refused = 0;
    for (let i = 0; i < 10_000; i++) {
      try {
        cluster.answer(1, mutate(g, g.pick(answers)));
      } catch (err) {
        expect((err as dt.DTorchError).code).toBe('PROTOCOL_ERROR');
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(9000);
    expect(() => cluster.answer(1, Buffer.from('not a payload'))).toThrow(/malformed op stream payload: it does not start with DTSM/);
    cluster.leave('answers done');
  });
});
