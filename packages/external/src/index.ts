// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
export {
  torchInfo,
  describeRuntime,
  dtorchVersion,
  cudaMemoryStats,
  cudaMatmulTuningStats,
  resetCudaPeakMemoryStats,
  setCudaSMCarveout,
  checkKernelTraceCounts,
  startKernelTrace,
  stopKernelTrace,
  type KernelTrace,
  type TorchInfo,
  type CudaDevice,
  type CudaMemoryStats,
  type CudaMatmulTuningStats,
} from './torch.js';
export {
  readSafetensorsHeader,
  parseSafetensorsHeader,
  readTensorBytes,
  writeSafetensors,
  safetensorsDtypes,
  MAX_HEADER_BYTES,
  type SafetensorsDtype,
  type SafetensorsHeader,
  type TensorEntry,
  type TensorBytes,
} from './safetensors.js';
export { readSafetensorsIndex, type SafetensorsIndex } from './safetensors_index.js';
export { SafetensorsCheckpoint, type CheckpointTensor, type ByteRun } from './safetensors_checkpoint.js';
export { type RepoFiles, LocalRepoFiles, listFolder } from './hub/repo_files.js';
export { openRepo, isHubRepoId, REPO_OPTION_NAMES, type RepoOptions } from './hub/open_repo.js';
export { HubRepoFiles, repoFolderName, type HubSettings } from './hub/hub_repo_files.js';
export { defaultHubCacheDir } from './hub/hub_env.js';
export type { DownloadProgress, ProgressSink } from './hub/hub_fetch.js';
export {
  CONTROL_PROTOCOL,
  TOKEN_METADATA,
  controlServiceDefinition,
  encodeWorkerMessage,
  controlClient,
  tokensEqual,
  grpc,
  type ControlDevice,
  type JoinMessage,
  type WorkerMessage,
  type MainMessage,
} from './cluster/control_service.js';
export { RendezvousStore, type StoreOp, type StoreReply, type StoreRequest } from './cluster/rendezvous_store.js';
export {
  storeReplyMessage,
  storeReplyOf,
  storeRequestMessage,
  storeRequestOf,
  type ReadStoreReply,
  type ReadStoreRequest,
  type StoreReplyMessage,
  type StoreRequestMessage,
} from './cluster/store_relay.js';
export {
  OpStreamServer,
  OpStreamClient,
  newOpStreamKey,
  OP_STREAM_KEY_BYTES,
  type OpStreamReject,
  type OpStreamSocketOptions,
  type OpStreamServerOptions,
  type OpStreamClientOptions,
} from './cluster/op_stream.js';
