/**
 * `tollgate`: the factories a user calls, every public type, and the typed errors. Re-exports
 * only; `test/package.test.ts` pins the runtime names. The rules toolkit beyond `loadRules` is
 * `tollgate/rules`; store classes and `CompiledPolicy` are types here (a user holds one, never
 * builds one: the factories and `compilePolicy` do).
 */

// The limiter, and the stores it decides on.
export { createLimiter } from './rules/create-limiter.js';
export type { Limiter, LimiterOptions } from './rules/create-limiter.js';
export type { DecideMode, LimiterCore, LimiterCoreOptions, LimitOptions, LimitRequest, LocalFirstStats, Usage, UsageOptions } from './limiter/index.js';
export type { AcquireOptions, HeldOptions, Permit, ReleaseOptions } from './limiter/index.js';
export type { LedgerExportOptions, LedgerRow, LedgerStats, LimiterLedger } from './limiter/index.js';
export type { LedgerOptions } from './algorithms/ledger-periods.js';
export { memoryStore } from './store/memory.js';
export type { MemoryStore, MemoryStoreOptions, MemoryStoreStats } from './store/memory.js';
export type { Store, StoreRequest, MaybePromise, WindowCounts } from './store/types.js';
// Reserve then settle: a request whose cost is known after it ran (docs/semantics.md).
export type { ReservedDecision, ReserveOptions, SettleOptions, Settlement, SettlementStatus } from './limiter/index.js';
export { redisStore } from './store/redis/index.js';
export type { RedisStore, RedisStoreOptions } from './store/redis/index.js';
export { memcachedStore } from './store/memcached/index.js';
export type { MemcachedStore, MemcachedStoreOptions } from './store/memcached/index.js';
export { regionStore, startReplicator } from './store/region/index.js';
export type { RegionStore, RegionStoreOptions, RegionConnection, PeerRegion, PeerStats, Replicator, ReplicatorOptions, ReplicatorStats, SourceReset } from './store/region/index.js';

// Policies and decisions. compilePolicy validates a policy once, at startup (docs/errors.md).
export { compilePolicy } from './policy.js';
export type { CompiledPolicy, Policy, AlgorithmName } from './policy.js';
export type { Decision, DecisionReason } from './decision.js';

// Rules: loadRules is what `createLimiter({ rules })` takes; the rest is in `tollgate/rules`.
export { loadRules } from './rules/load.js';
export type { RuleSet, RulesHolder, RuleSource, CompiledRule } from './rules/ruleset.js';
export type { WatchRulesOptions, RulesWatcher, RulesWatchStatus } from './rules/watch.js';
export type { RulesSync, RulesSyncOptions, RulesSyncStatus, RulesPushResult, SkippedDomain } from './rules/shared/sync.js';
export type { CheckRequest, CheckResult, CheckOptions, DescriptorStatus, CurrentLimit, RateLimitDescriptor } from './rules/check.js';
export type { DescriptorEntry } from './rules/match.js';
export type { DomainConfig, DescriptorConfig, RateLimitConfig, RuleUnit, FailureMode, SourceLocation } from './rules/types.js';
export type { ConcurrencyConfig } from './rules/types.js';
export type { SlotCheckResult, SlotStatus } from './rules/concurrency.js';
export type { ReserveCheckRequest, ReserveCheckResult, SettleCheckRequest, SettleCheckResult, SettledStatus } from './rules/reservations.js';

// The typed errors: a caller tells them apart with `instanceof` or `code` (docs/errors.md).
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
export type { TollgateErrorCode } from './errors.js';
