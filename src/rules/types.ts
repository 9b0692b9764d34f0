/**
 * Rules as loaded from YAML, in envoyproxy/ratelimit's format plus Tollgate's additions: a plain,
 * validated tree that mirrors the file (with source positions for error messages). compileRules
 * (ruleset.ts) turns it into lookup maps for the matcher (match.ts); decisions never walk this tree.
 */
import type { LedgerOptions } from '../algorithms/ledger-periods.js';
import type { AlgorithmName, ShareSpec } from '../policy.js';
import type { RuleUnit } from '../units.js';

import type { FailureMode } from '../limiter/index.js';

export type { RuleUnit } from '../units.js';
/** What a limit does when its store fails (limiter/failure-modes.ts). */
export type { FailureMode } from '../limiter/index.js';

/** Where something was written: 1-based line and column. */
export interface SourceLocation {
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

/** A `rate_limit:` block. */
export interface RateLimitConfig {
  /** Required unless `unlimited`. */
  readonly unit?: RuleUnit;
  /** Required unless `unlimited`: an integer ≥ 0. */
  readonly requestsPerUnit?: number;
  /** Tollgate: the window is `unitMultiplier` units (300 per 3 hours). Default 1. */
  readonly unitMultiplier: number;
  /** envoy: names this limit, so other limits can `replaces` it. */
  readonly name?: string;
  /** envoy: never limited, never touches the store. */
  readonly unlimited: boolean;
  /** envoy: names of limits this one replaces when both match one request. */
  readonly replaces: readonly string[];
  /** Tollgate: default `fixed-window` (as envoy counts). */
  readonly algorithm: AlgorithmName;
  readonly burst?: number;
  /** Tollgate: sliding-window's buckets per window (1..100; absent: 1, the two-window counter). */
  readonly precision?: number;
  /** Tollgate: soft throttling percent (integer, default 0). */
  readonly softPercent: number;
  /** Tollgate: what this limit answers when the store fails; absent: the limiter's (the service's) failure mode. */
  readonly failureMode?: FailureMode;
  /** Tollgate: longest wait for the store on a check this limit is part of, in ms; absent: the limiter's. */
  readonly deadlineMs?: number;
  /** Tollgate: a token lease of this many units (the limiter's `lease`): fewer store calls, some under-admission. */
  readonly leaseSize?: number;
  /** Tollgate: local-first, syncing every this many ms (the limiter's `syncIntervalMs`): no store round trip, some over-admission. */
  readonly syncIntervalMs?: number;
  /** Tollgate: units each matching request takes (integer ≥ 1), multiplied by the request's hits. */
  readonly cost?: number;
  /** Tollgate: `unit` on the calendar in `timeZone` (a month from the 1st; fixed-window; absent: envoy's fixed lengths). */
  readonly calendar?: boolean;
  /** Tollgate: the IANA time zone of a `calendar` unit (absent: UTC). */
  readonly timeZone?: string;
  /** `block_duration`, in ms: the penalty after a denial (the policy's blockDuration). */
  readonly blockMs?: number;
  /** Tollgate: `share: { group, weight }`, fair shares of `requests_per_unit` among the keys of a group (the policy's share). */
  readonly share?: ShareSpec;
  readonly location: SourceLocation;
}

/** One entry of `descriptors:` (nested). */
/** A descriptor's concurrency limit (parse/concurrency.ts): `limit` slots, each held at most `ttlMs`. */
export interface ConcurrencyConfig {
  readonly limit: number;
  readonly ttlMs: number;
}

export interface DescriptorConfig {
  readonly key: string;
  /** Absent: any value matches, one counter per value. May hold `*` wildcards. */
  readonly value?: string;
  readonly rateLimit?: RateLimitConfig;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly quotaMode: boolean;
  /** With a wildcard value: all matching values share one counter. */
  readonly shareThreshold: boolean;
  /**
   * envoy: any mapping, returned in the response's dynamic metadata when this descriptor's limit
   * applied and passed (as envoy's RESPONSE_DYNAMIC_METADATA); JSON-safe values only.
   */
  readonly metadata?: Readonly<Record<string, unknown>>;
  /** At most this many requests matching the descriptor in flight at once (`/v1/acquire`). */
  readonly concurrency?: ConcurrencyConfig;
  /** Tollgate: a usage ledger of this descriptor's limit (`ledger: true` or its options; docs/quotas.md §3). */
  readonly ledger?: true | LedgerOptions;
  readonly descriptors: readonly DescriptorConfig[];
  readonly location: SourceLocation;
}

/** One YAML document: one domain. */
/**
 * One entry of a domain's `allow:` or `deny:` list: a request with a descriptor entry of `key`
 * whose value is one of `values` matches. A value that is an IP address or a CIDR (IPv4 or IPv6)
 * matches the addresses it names, however they are written; any other value matches as written.
 */
export interface ListConfig {
  readonly key: string;
  readonly values: readonly string[];
  readonly location: SourceLocation;
}

export interface DomainConfig {
  readonly domain: string;
  readonly descriptors: readonly DescriptorConfig[];
  /** `allow:`, values never limited, and `deny:`, values always refused, checked before any limit (rules/lists.ts). */
  readonly allow?: readonly ListConfig[];
  readonly deny?: readonly ListConfig[];
  /** File (or other source name) it came from. */
  readonly source: string;
}
