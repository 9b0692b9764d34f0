/**
 * The types of `limiter.check()`: envoy's RateLimitRequest and RateLimitResponse in Tollgate's
 * words, and the bounds of a request.
 */
import type { DegradedReason, FailureMode } from '../limiter/index.js';
import type { DescriptorEntry } from './match.js';
import type { RuleUnit } from './types.js';

/** envoy's RateLimitOverride: a limit the caller sends with the descriptor. */
export interface LimitOverride {
  /** A whole number from 0 to 4294967295. */
  readonly requestsPerUnit: number;
  readonly unit: RuleUnit;
}

/** A descriptor of a request: the entries identify who is calling and what. */
export interface RateLimitDescriptor {
  readonly entries: readonly DescriptorEntry[];
  /**
   * Hits this descriptor adds, instead of the request's `hits`. An explicit 0 checks without
   * counting (envoy's `hits_addend: 0`): over the limit only when the quota is already overdrawn.
   */
  readonly hitsAddend?: number;
  /** This limit instead of the rules' (envoy's RateLimitOverride), counted under its own key. */
  readonly limit?: LimitOverride;
}

/** envoy's RateLimitRequest. */
export interface CheckRequest {
  readonly domain: string;
  readonly descriptors: readonly RateLimitDescriptor[];
  /** Hits the request adds to every matched limit (envoy's hits_addend). 0 or absent means 1. */
  readonly hits?: number;
  /** Decision time in epoch ms (tests, replays). */
  readonly now?: number;
  /** The request's id: limits with a usage ledger bill a retry repeating it once (1 to 200 characters). */
  readonly requestId?: string;
}

/** The limit that applied to a descriptor, as envoy reports it. */
export interface CurrentLimit {
  readonly requestsPerUnit: number;
  readonly unit: RuleUnit;
  /** Tollgate: the window is this many units. */
  readonly unitMultiplier: number;
  readonly name?: string;
}

/** One status per descriptor, in request order. */
export interface DescriptorStatus {
  readonly code: 'OK' | 'OVER_LIMIT';
  /** Absent when no limit applied (no match, replaced, or unlimited). */
  readonly currentLimit?: CurrentLimit;
  /**
   * What is left of the limit after this request: 0 when OVER_LIMIT; in a request another limit
   * denied, what actually remains (nothing was counted); 4294967295 for an unlimited descriptor.
   */
  readonly limitRemaining: number;
  /** ms until the limit's quota is whole again. */
  readonly durationUntilReset: number;
  /**
   * Over the limit (shadow mode included): ms after the decision's `now` when the same hits would
   * pass — `Decision.retryAfter`, often far shorter than `durationUntilReset` (a token bucket
   * refills one token long before it is full). Absent when the limit admitted the request.
   */
  readonly retryAfter?: number;
  /** Shadow mode: this limit was exceeded but, being in shadow mode, did not deny. */
  readonly shadowOverLimit?: boolean;
  /** Quota mode: this limit is over, but did not deny the request (another quota-mode limit passed). */
  readonly quotaOverLimit?: boolean;
  /** Where the limit is in the rules (`domain.key=value...`), when one applied. */
  readonly rule?: string;
  /** The counter this descriptor counted in (`domain|key=value|...`), when a limit applied. */
  readonly key?: string;
  /** The store could not decide: this status is its limit's failure mode's answer. */
  readonly degraded?: DegradedReason;
  /**
   * leaky-bucket limits that passed: ms a shaping caller holds the request before passing it on
   * (its turn in the queue, from the decision's `now`). Absent for other algorithms.
   */
  readonly delay?: number;
  /** The domain's allow or deny list decided this request, before any limit (rules/lists.ts); `rule` names it. */
  readonly list?: 'allow' | 'deny';
  /**
   * Over the limit because the key serves a penalty (`block_duration`), or because an operator
   * blocked an entry (rule `blocked`): `retryAfter` is the block's end.
   */
  readonly blocked?: true;
  /** With `blocked`: this denial, the first by the limit's quota, started the penalty. */
  readonly blockStarted?: true;
}

/** envoy's RateLimitResponse. */
export interface CheckResult {
  readonly overallCode: 'OK' | 'OVER_LIMIT';
  readonly statuses: readonly DescriptorStatus[];
  /**
   * The instant the check was decided (epoch ms): the decisions' own time (Redis `TIME` on Redis),
   * else the limiter's clock. Every `durationUntilReset` is relative to it, and headers derived
   * from the result must use it, not a later clock reading.
   */
  readonly now: number;
  /**
   * The `metadata` of the rules whose limits applied and passed, merged (envoy's dynamic metadata
   * `metadata` field); absent when none has any.
   */
  readonly metadata?: Readonly<Record<string, unknown>>;
  /**
   * Present when the store could not decide some limit and a failure mode answered instead: the
   * most severe of them (`fail-closed` over `local-fallback` over `fail-open`).
   */
  readonly degraded?: DegradedReason;
}

/** How a check spends and decides. */
export interface CheckOptions {
  /** Default true. False: nothing is recorded and nothing is denied; statuses report the quota as it stands. */
  readonly spend?: boolean;
  /** envoy's QUOTA_MODE: every limit is in quota mode. Default false. */
  readonly quotaMode?: boolean;
  /** envoy's SHADOW_MODE: the overall code is always OK; statuses still say which limits are over. Default false. */
  readonly shadowMode?: boolean;
  /** The failure mode of limits whose rule names none. Default: the limiter's. */
  readonly failureMode?: FailureMode;
  /** Longest wait for the store, in ms, over every rule's `deadline_ms`. Default: the smallest of the rules', else the limiter's. */
  readonly deadlineMs?: number;
  /**
   * Shaping (the gateway's `shaping.max_delay`): a leaky-bucket limit queues only what drains within
   * this many ms, so a request whose turn is further off is refused instead of held. Its counters
   * are the rule's own (state is kept per key, algorithm and window, whatever the burst).
   */
  readonly maxDelayMs?: number;
}

/** Most descriptors in one request, and entries in one descriptor. */
export const MAX_DESCRIPTORS = 64;
export const MAX_ENTRIES = 32;
/** envoy reports an unlimited descriptor's remaining as the largest uint32. */
export const UNLIMITED_REMAINING = 4_294_967_295;

