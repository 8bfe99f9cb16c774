// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
export { Engine, engine, type DeviceKind } from './engine.js';
export { opTable, type OpAttrs, type OpEntry, type OpName, type OpsWithAttrs } from './op_table.js';
export { CallSites, type CaptureMode } from './call_sites.js';
export { dtypeNames, hostArrayFor, dtypeOfHostArray, type DTypeName } from './host_arrays.js';
export type { ClusterDeviceEntry, ClusterSlice, CoreSlice, Fetched, GraphStats, HostArray, MemoryInfo, DeviceMemoryInfo, NativeSettings, OpInfo, PieceInfo, SignatureRowInfo, WorkerInfo } from './native_slice.js';
export { MainNode, type ClusterOptions, type ClusterDevice, type ClusterNode } from './cluster/main_node.js';
export { runWorker, type WorkerOptions, type WorkerEnd } from './cluster/worker_node.js';
