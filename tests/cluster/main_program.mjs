// A main program in a process of its own, for the test that kills it: starts a cluster on
// 127.0.0.1 and a free port, prints the address, waits for one worker, prints "joined", and then
// waits (the test kills it with SIGKILL).
import * as dt from '@dtorch/api';

await dt.cluster.start({ workers: 1, joinTimeoutMs: 20_000, onListening: (address) => console.log(`listening ${address}`) });
console.log('joined');
setInterval(() => undefined, 1000);
