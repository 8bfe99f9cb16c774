#!/usr/bin/env node
// One program over 3 processes: this one is the main node, and it starts 2 `dtorch worker`
// processes on 127.0.0.1 (on real hosts, ssh or Slurm starts them: docs/cluster.md). A mesh over
// the workers' 4 CPU devices runs what this program records; the read is answered by a worker.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as dt from '@dtorch/api';

const dtorch = fileURLToPath(new URL('../packages/hf/bin/dtorch.js', import.meta.url)); // the `dtorch` command

const workers = [];
try {
  await dt.cluster.start({
    workers: 2,
    onListening: (address) => {
      for (let i = 0; i < 2; i++) workers.push(spawn(process.execPath, [dtorch, 'worker', '--main', address, '--devices', 'cpu:0-1'], { stdio: ['ignore', 'ignore', 'inherit'] }));
    },
  });
  const devices = dt.cluster.devices('cpu').filter((d) => d.node !== 0); // node 0's are this process's own
  const mesh = new dt.DeviceMesh('cpu', devices.map((d) => d.index));
  console.log(`${mesh} on nodes ${[...new Set(devices.map((d) => d.node))].join(' and ')}`);
  const x = dt.arange(8, { mesh, placements: [dt.Shard(0)] }).mul(2);
  console.log('sum of 2 * [0..7]:', await x.sum().item()); // 56
  await dt.cluster.shutdown('done');
} finally {
  for (const w of workers) w.kill();
}
