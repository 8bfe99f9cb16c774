// A main program that loses its worker while collectives over a mesh spanning it are in flight,
// and then ends without waiting for them (exit_after_loss.test.ts). It starts a cluster on
// 127.0.0.1 with one `dtorch worker` process of its own, queues reads of work whose collectives
// cross into the worker, kills the worker with SIGKILL and then, by argv[2]:
// - "exit": calls process.exit(0) at once;
// - "end": shuts the cluster down and lets the event loop end;
// - "read-at-exit": as "end", with a read made on the process's 'exit' (by a listener that runs
//   before the engine's stop), so that its result comes in while the environment tears down.
import { spawn } from 'node:child_process';
import * as dt from '@dtorch/api';

const how = process.argv[2];
let local;
if (how === 'read-at-exit') {
  process.on('exit', () => void local.sum().data().catch(() => undefined));
}
let worker;
await dt.cluster.start({
  workers: 1,
  devices: [{ kind: 'cpu', index: 0 }],
  joinTimeoutMs: 20_000,
  onListening: (address) => {
    worker = spawn(process.execPath, ['packages/hf/bin/dtorch.js', 'worker', '--main', address, '--devices', 'cpu:0-1'], { stdio: 'ignore' });
  },
});
// this process's cpu:0 and the worker's two devices: each redistribute is a collective across both
const mesh = new dt.DeviceMesh('cpu', dt.cluster.devices('cpu').map((d) => d.index));
local = dt.ones([64, 64], { mesh: new dt.DeviceMesh('cpu', [0]) });
for (let k = 0; k < 2; k++) {
  const x = dt.randn([1024, 1024], { seed: k, mesh, placements: [dt.Shard(0)] });
  let y = x;
  for (let i = 0; i < 3; i++) y = y.matmul(x.redistribute([dt.Replicate()])).tanh();
  void y.sum().data().catch(() => undefined);
}
await new Promise((r) => setTimeout(r, 200));
worker.kill('SIGKILL');
console.log('killed');
if (how === 'exit') process.exit(0);
await dt.cluster.shutdown('the program ended');
console.log('shut down');
