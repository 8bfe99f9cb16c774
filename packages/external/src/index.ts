export { torchInfo, describeRuntime, type TorchInfo, type CudaDevice } from './torch.js';
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
