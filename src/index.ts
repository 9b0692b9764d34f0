export { createLimiter, MAX_KEY_BYTES } from './limiter.js';
export type { Limiter, LimiterOptions, LimitOptions } from './limiter.js';
export { memoryStore, MemoryStore } from './store/memory.js';
export type { MemoryStoreOptions, MemoryStoreStats } from './store/memory.js';
export type { Store, MaybePromise } from './store/types.js';
export { compilePolicy, CompiledPolicy, ALGORITHMS } from './policy.js';
export type { Policy, AlgorithmName } from './policy.js';
export type { Decision, DecisionReason } from './decision.js';
export {
  TollgateError,
  InvalidPolicyError,
  InvalidCostError,
  InvalidKeyError,
  InvalidTimeError,
  InvalidOptionError,
} from './errors.js';
export type { TollgateErrorCode } from './errors.js';
