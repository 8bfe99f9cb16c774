// `dtorch serve`: an image service over one loaded pipeline (OpenAI's images API, jobs with
// progress events, a web page, metrics).
export { createImageServer, type ImageServer } from './server.js';
export { PipelineRunner, batchKey, type BatchOutput, type RunnerSize, type RunnerOptions } from './pipeline_runner.js';
export { ServedLoras, loraKey, type LoraWeight, type LoraBody, type LoraEntry, type ServedLora } from './lora_choice.js';
export { ClusterRunner, type ClusterRunnerOptions, type ClusterRunnerState, type ClusterHealth, type LostWorker } from './cluster_runner.js';
export { checkServeOptions, defaultLimits, type ServeOptions, type ServeLimits, type CheckedServeOptions } from './serve_options.js';
export { isLoopback, tokenMatches, authorized, readTokenFile } from './auth.js';
export { JobStore, finalStates, whenFinal, type Job, type JobState, type JobProgress, type JobTimings, type JobError, type JobFile, type JobStoreEvents } from './job_store.js';
export { JobQueue, QueueFullError, type QueueObserver } from './job_queue.js';
export { RequestError, type ErrorBody } from './request_error.js';
export { imageRequest, generationSchema, parseRequestSize, type ImageRequest, type GenerationBody } from './image_request.js';
export { jobView } from './job_view.js';
