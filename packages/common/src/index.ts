// For TypeScript consumers: these declarations use Node's types, whatever the consumer's `types`
// (@types/node is the one thing to install beside the package).
/// <reference types="node" preserve="true" />
export { DTorchError, ErrorCode, isDTorchError } from './errors.js';
export { config, readConfig, type DTorchConfig, type Env } from './env.js';
export { log, setLogLevel, logLevelEnabled, type LogLevel } from './log.js';
export {
  checkBoolean,
  checkOptions,
  checkKnownOptions,
  checkInteger,
  checkFinite,
  checkNumber,
  checkShape,
  describeValue,
  formatShape,
  invalidParameter,
  isInteger,
  quoteText,
} from './check.js';
export { native, loadNative, defaultCandidates, formatLoadFailure, type NativeAddon, type LoadAttempt } from './loader.js';
