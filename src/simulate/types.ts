/**
 * The plain data of a simulation: a parsed access-log line, and the report `simulate()` returns
 * (the CLI renders it as a table, JSON or HTML; item 6 of issue 16 reads it to measure precision).
 */
import type { AlgorithmName } from '../policy.js';

/** One request of an access log. */
export interface LogEntry {
  /** When the request was made, epoch ms. */
  readonly time: number;
  /** Its fields by name (`ip`, `method`, `path`, `header.x-api-key`, ...); absent when the log has none. */
  readonly fields: Readonly<Record<string, string | undefined>>;
  /** 1-based line number in the log, for messages. */
  readonly line?: number;
}

/** One of the busiest keys of a rule. */
export interface TopKey {
  /** The counter key (`domain|key=value|...`). */
  readonly key: string;
  readonly count: number;
  /** At most this much of `count` may belong to keys evicted before it (Space-Saving); 0 is exact. */
  readonly error: number;
}

/** Requests a rule allowed and throttled in one time bucket. */
export interface TimeBucket {
  /** Start of the bucket, epoch ms. */
  readonly start: number;
  readonly allowed: number;
  readonly throttled: number;
}

/** Decisions where a run and the reference algorithm disagree, per rule. */
export interface RuleDifference {
  /** Decisions of this rule made by both (the same requests). */
  readonly compared: number;
  /** Allowed by this run, throttled by the reference. */
  readonly allowedOnlyHere: number;
  /** Throttled by this run, allowed by the reference. */
  readonly allowedOnlyByReference: number;
}

/** What one limit of the rules did to the log's traffic. */
export interface RuleReport {
  /** Where the limit is in the rules: `domain.key=value.key`. */
  readonly rule: string;
  readonly domain: string;
  /** `5 per second`, `300 per 3 hours`. */
  readonly limit: string;
  /** The algorithm that decided (the rules' own, or the run's override). */
  readonly algorithm: AlgorithmName;
  readonly shadowMode: boolean;
  /** Requests that reached this limit. */
  readonly requests: number;
  readonly allowed: number;
  /** Over this limit (in shadow mode: would have been throttled). */
  readonly throttled: number;
  /** Distinct counter keys seen (exact up to `maxTrackedKeys`, then a lower bound). */
  readonly keys: number;
  readonly topByRequests: readonly TopKey[];
  readonly topByThrottled: readonly TopKey[];
  /** Allowed and throttled over time, buckets of `bucketMs`. */
  readonly timeline: { readonly bucketMs: number; readonly buckets: readonly TimeBucket[] };
  /** Present with `compareTo`: how this run's decisions differ from the reference algorithm's. */
  readonly difference?: RuleDifference;
}

/** One replay of the log: the rules as written, or with every limit's algorithm replaced. */
export interface SimulationRun {
  /** `rules` (each limit's own algorithm), or the algorithm (or the variant's label) every limit was given. */
  readonly algorithm: string;
  /** Requests (log lines with at least one descriptor) decided. */
  readonly requests: number;
  readonly allowed: number;
  /** Requests refused overall (some enforced limit over). */
  readonly throttled: number;
  /** One per limit that decided at least one request, in the order first met. */
  readonly rules: readonly RuleReport[];
}

/** What `simulate()` returns. */
export interface SimulationReport {
  /** Log entries read. */
  readonly entries: number;
  /** Entries that gave no descriptor (their fields were absent or no `when` matched). */
  readonly unmapped: number;
  /** Entries whose time was before one already seen: decided at the latest time seen instead. */
  readonly outOfOrder: number;
  /** First and last decision time, epoch ms (undefined when nothing was decided). */
  readonly start?: number;
  readonly end?: number;
  /** The reference algorithm (or variant label) of `difference`, when asked. */
  readonly compareTo?: string;
  readonly runs: readonly SimulationRun[];
}
