// A worker node's engine without a network, for stream_payloads.test.ts: joins as node 1,
// applies the payloads in the file argv[2] (what a main node streamed: JSON of base64 strings,
// { snapshot, stream }) as `dtorch worker` does, then 10,000 mutations of them; prints one JSON
// line: what it answered (decoded), and how many mutations it refused and took.
import { readFileSync } from 'node:fs';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';

const cluster = engine().cluster;
const { snapshot, stream, seed } = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const decoded = (list) => list.map((p) => Buffer.from(p, 'base64'));
// the snapshot (every device and mesh) was taken after the stream: of the stream, the segments
const payloads = [...decoded(snapshot), ...decoded(stream).filter((p) => cluster.decode(p).type === 3)];
cluster.join(1, 1, undefined, [], () => undefined, '');
for (const p of payloads) cluster.apply(p);
await dt.sync(); // this node's own work is done: every answer is in the outbox
await new Promise((r) => setTimeout(r, 200));
const answers = cluster.takeOutgoing().map((p) => cluster.decode(p).type);

// mulberry32, as tests/distributed/random.ts
let a = seed >>> 0;
const next = () => {
  a = (a + 0x6d2b79f5) >>> 0;
  let t = a;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
function mutate(payload) {
  const bytes = Buffer.from(payload);
  switch (bytes.length === 0 ? 2 : int(0, 3)) {
    case 0:
      for (let k = int(1, 4); k > 0; k--) {
        const at = int(0, bytes.length - 1);
        bytes[at] ^= 1 << int(0, 7);
      }
      return bytes;
    case 1:
      return bytes.subarray(0, int(0, bytes.length - 1));
    case 2:
      return Buffer.concat([bytes, Buffer.from(Array.from({ length: int(1, 16) }, () => int(0, 255)))]);
    default:
      if (bytes.length >= 12) bytes.writeUInt32LE([0xffffffff, 0x7fffffff, 65536, 0][int(0, 3)], int(0, bytes.length - 4));
      return bytes;
  }
}
let refused = 0;
let taken = 0;
const otherCodes = [];
for (let i = 0; i < 10_000; i++) {
  try {
    cluster.apply(mutate(payloads[int(0, payloads.length - 1)]));
    taken++;
  } catch (err) {
    if (err.code === 'PROTOCOL_ERROR') refused++;
    else otherCodes.push(`${err.code}: ${err.message}`);
  }
}
await dt.sync();
await new Promise((r) => setTimeout(r, 200));
const told = cluster.takeOutgoing().map((p) => cluster.decode(p).type);
cluster.leave('fuzz done');
const after = Array.from(await dt.tensor([1, 2, 3], { mesh: new dt.DeviceMesh('cpu', [0]) }).mul(2).data());
console.log(JSON.stringify({ answers, refused, taken, otherCodes: otherCodes.slice(0, 5), rejectedTold: told.filter((t) => t === 18).length, after }));
