// Fitting a memory budget: a pipeline's models on their devices only while they run
// (DiffusionPipeline.enableModelCpuOffload), a model's blocks moved in groups (applyGroupOffloading).
export { applyGroupOffloading, groupOffloadingOf, type GroupOffloading, type GroupOffloadingOptions } from './group_offloading.js';
