export { torchInfo, describeRuntime, type TorchInfo } from './torch.js';
