#!/usr/bin/env node
// @dtorch/external's facts and files: the DTorch and LibTorch versions, CUDA, NCCL and the devices
// (what `dtorch info` prints), and a model repository opened from a local folder (a hub id such as
// 'google/t5-v1_1-small' opens the same way, downloading into the standard HF cache).
//   node examples/runtime.mjs
import { fileURLToPath } from 'node:url';
import { describeRuntime, openRepo } from '@dtorch/external';

console.log(describeRuntime());
const repo = await openRepo(fileURLToPath(new URL('assets', import.meta.url)));
console.log('files in examples/assets:', repo.list().join(', '));
