// dt.functional (also dt.F): the neural-network ops, as torch.nn.functional names them: every
// export of the activation, nn, image and overlapped-linear families, and pad.
export * from './ops/activation.js';
export * from './ops/nn.js';
export * from './ops/image.js';
export * from './ops/overlapped_linear.js';
export { pad } from './ops/shape.js';
