// @dtorch/nn: Module, layers, tensor-parallel layers and state-dict loading arrive with the
// nn issue. Until then the package re-exports the API it builds on.
export * as api from '@dtorch/api';
