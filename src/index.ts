export { createLimiter } from './rules/create-limiter.js';
export type { Limiter, LimiterOptions } from './rules/create-limiter.js';
export { MAX_KEY_BYTES, MAX_LIMITS_PER_CHECK } from './limiter/core.js';
export type { DecideMode, LimiterCore, LimiterCoreOptions, LimitOptions, LimitRequest, LocalFirstStats } from './limiter/core.js';
export { memoryStore, MemoryStore } from './store/memory.js';
export type { MemoryStoreOptions, MemoryStoreStats } from './store/memory.js';
export type { Store, StoreRequest, MaybePromise, WindowCounts } from './store/types.js';
export { redisStore, RedisStore } from './store/redis/index.js';
export type { RedisStoreOptions } from './store/redis/index.js';
export { regionStore, RegionStore, startReplicator } from './store/region/index.js';
export type { RegionStoreOptions, RegionConnection, PeerRegion, PeerStats, Replicator, ReplicatorOptions, ReplicatorStats } from './store/region/index.js';
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
  StoreUnavailableError,
  StoreDataError,
  StoreError,
  RulesError,
  InvalidCheckError,
} from './errors.js';
export { RuleSet, RulesHolder, compileRules } from './rules/ruleset.js';
export { loadRules } from './rules/load.js';
export { parseRules } from './rules/parse/index.js';
export { watchRules } from './rules/watch.js';
export type { WatchRulesOptions, RulesWatcher, RulesWatchStatus } from './rules/watch.js';
export { RulesSync } from './rules/sync.js';
export type { RulesSyncOptions, RulesSyncStatus, RulesPushResult, SkippedDomain } from './rules/sync.js';
export type { RuleSource, CompiledRule } from './rules/ruleset.js';
export type { CheckRequest, CheckResult, CheckOptions, DescriptorStatus, CurrentLimit, RateLimitDescriptor } from './rules/check.js';
export type { DescriptorEntry } from './rules/match.js';
export type { DomainConfig, DescriptorConfig, RateLimitConfig, RuleUnit, FailureMode, SourceLocation } from './rules/types.js';
export type { TollgateErrorCode } from './errors.js';
