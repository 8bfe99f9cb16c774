export {
  torchInfo,
  describeRuntime,
  cudaMemoryStats,
  resetCudaPeakMemoryStats,
  type TorchInfo,
  type CudaDevice,
  type CudaMemoryStats,
} from './torch.js';
export {
  readSafetensorsHeader,
  readTensorBytes,
  writeSafetensors,
  safetensorsDtypes,
  MAX_HEADER_BYTES,
  type SafetensorsDtype,
  type SafetensorsHeader,
  type TensorEntry,
  type TensorBytes,
} from './safetensors.js';
