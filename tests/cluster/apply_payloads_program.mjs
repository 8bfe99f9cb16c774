// A worker node's engine without a network, for stream_payloads.test.ts: joins as node 1,
// applies the payloads in the file argv[2] (JSON of base64 strings, { program, mutations }: what
// a main node streamed, and mutations of it the test made) as `dtorch worker` does, the program
// first; prints one JSON line: what it answered (decoded), and how many mutations it refused and took.
import { readFileSync } from 'node:fs';
import * as dt from '@dtorch/api';
import { engine } from '@dtorch/core';

const cluster = engine().cluster;
const given = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const [program, mutations] = [given.program, given.mutations].map((list) => list.map((p) => Buffer.from(p, 'base64')));
cluster.join(1, 1, undefined, [], () => undefined, '');
for (const p of program) cluster.apply(p);
await dt.sync(); // this node's own work is done: every answer is in the outbox
await new Promise((r) => setTimeout(r, 200));
const answers = cluster.takeOutgoing().map((p) => cluster.decode(p).type);

let refused = 0;
let taken = 0;
const otherCodes = [];
for (const bad of mutations) {
  try {
    cluster.apply(bad);
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
