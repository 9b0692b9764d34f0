/**
 * The engine as the rest of Tollgate sees it: the limiter without rules, its options and per-call
 * types, the failure modes and the store's health. Only re-exports (layers live in their files).
 */
export { CoreLimiter, createLimiterCore, MAX_LIMITS_PER_CHECK, MAX_KEY_BYTES, type LimiterCore } from './core.js';
export { limiterCoreOptions, type CoreSettings, type LimiterCoreOptions } from './settings.js';
export { checkLeasable, checkLease, checkSyncInterval, LEASABLE_ALGORITHMS, MAX_SYNC_INTERVAL_MS, MIN_SYNC_INTERVAL_MS, type DecideMode, type LimitAllOptions, type LimitOptions, type LimitRequest } from './checks.js';
export {
  checkFailureMode,
  degradedReasonOf,
  DEGRADED_REASON,
  FAILURE_MODES,
  MAX_DEADLINE_MS,
  type DegradedReason,
  type FailureMode,
  type LimiterFailureMode,
} from './failure-modes.js';
export type { BreakerOptions, BreakerState, BreakerTransition } from './breaker.js';
export type { FallbackCause, StoreHealthSnapshot, TransitionListener } from './store-guard.js';
export type { OverLimitCacheOptions, OverLimitCacheStats } from './over-limit.js';
export type { LocalFirstStats } from './local-first.js';
export { resultOf } from './spans.js';
export { checkReservable, checkReserveOptions, checkSettleOptions, DEFAULT_RESERVATION_TTL_MS, MAX_RESERVATION_ID_LENGTH, MAX_RESERVATION_TTL_MS, type ReserveOptions, type SettleOptions, type ReservedDecision, type Settlement, type SettlementStatus } from './reservations.js';
export type { Usage, UsageOptions } from './usage.js';
export { EXPORT_PAGE, type LedgerExportOptions, type LedgerRow, type LedgerStats, type LimiterLedger } from './ledger.js';
export { checkPermitId, checkSlotTtl, MAX_SLOTS, MAX_SLOT_TTL_MS, PERMIT_ID_PATTERN, type AcquireOptions, type HeldOptions, type Permit, type ReleaseOptions } from './concurrency.js';
