// `dtorch worker` from code, for the cluster test: joins the main node named by argv[2] with
// cpu:0 and cpu:1 (the token from DTORCH_CLUSTER_TOKEN), prints how it ended, exits 0.
import * as dt from '@dtorch/api';

const end = await dt.cluster.runWorker({ main: process.argv[2], devices: [{ kind: 'cpu', index: 0 }, { kind: 'cpu', index: 1 }], onWelcome: ({ node }) => console.log(`welcome ${node}`) });
console.log(`ended as node ${end.node}: ${end.reason}`);
