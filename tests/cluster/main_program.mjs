// A main program in a process of its own, for the tests that kill or stop it: starts a cluster on
// 127.0.0.1 and a free port, prints the address, waits for one worker, prints "joined", and then
// waits (the test kills it with SIGKILL or stops it with SIGSTOP). With "busy" as argv[2], it
// first queues seconds of work on a mesh over the worker's two devices and prints "busy" once that
// has been sent; with "collective", the same on a mesh over this process's cpu:0 and the worker's
// devices, so that the worker's ranks wait on this process's in Gloo collectives.
import * as dt from '@dtorch/api';

await dt.cluster.start({ workers: 1, joinTimeoutMs: 20_000, onListening: (address) => console.log(`listening ${address}`) });
console.log('joined');
if (process.argv[2] === 'busy' || process.argv[2] === 'collective') {
  const mesh = new dt.DeviceMesh('cpu', dt.cluster.devices('cpu').filter((d) => d.node === 1 || (process.argv[2] === 'collective' && d.node === 0)).map((d) => d.index));
  let x = dt.randn([1024, 1024], { seed: 1, mesh, placements: [dt.Shard(0)] });
  for (let i = 0; i < 400; i++) x = x.matmul(x.redistribute([dt.Replicate()])).tanh();
  void x.sum().data().catch(() => undefined);
  setTimeout(() => console.log('busy'), 300);
}
setInterval(() => undefined, 1000);
