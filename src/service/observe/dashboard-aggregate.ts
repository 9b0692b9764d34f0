/**
 * The counts behind the dashboard, fed by the service's event stream and closed once a second:
 * checks (requests) by overall result, limit decisions (one per descriptor that met a limit) by
 * result, per rule, the most throttled keys, traffic to unknown domains, and the decision latency
 * over the last seconds. Memory is bounded by constants (rules, keys, domains, seconds of history).
 *
 * Two families of numbers, never mixed: a *check* is one request (`/json`, `/v1/check`, gRPC, the
 * gateway, `/v1/limit`) and is either allowed or throttled as a whole; a *decision* is one limit
 * applied to one descriptor of a check (a check can carry several). So checks = allowed checks +
 * throttled checks, and decisions = allowed decisions + over-limit decisions.
 */
import type { BreakerState, DegradedReason, StoreHealthSnapshot } from '../../limiter/index.js';
import type { CheckEvent, RejectedEvent, ServiceContext, SlotEvent, StoreErrorEvent } from '../context.js';
import { FallbackRate, sumCauses, type CauseCounts } from './dashboard-health.js';
import { BLOCKED_RULE, classifyCheck, NO_RULE, UNKNOWN_DOMAIN_CAP } from '../check/outcomes.js';
import { BoundedCounts, LatencyWindow, type LatencySummary } from './metric-tally.js';

/** Seconds of per-second history kept (and sent to a client that connects). */
export const HISTORY_SECONDS = 120;
/** Distinct rules tracked; decisions of later ones are counted under {@link OTHER_RULES}. */
export const MAX_RULES = 500;
/** Rules listed per snapshot (the busiest), and entries in the top-N lists. */
export const MAX_LISTED_RULES = 50;
export const TOP_N = 10;
/** Counters of the most-throttled-keys sketch (Space-Saving: the true top keys are found within its error). */
export const KEY_SLOTS = 128;
/** Longest key shown (keys may be long; they are cut, never used as labels). */
export const MAX_KEY_CHARS = 160;
export const OTHER_RULES = '(other rules)';

/** Per-rule decisions: allowed, throttled (over limit), shadow-mode hits, near-limit. */
export interface RuleCounts {
  allowed: number;
  throttled: number;
  shadow: number;
  near: number;
}

/** Checks a failure mode answered (a check's `result.degraded`): all, and by reason. */
interface DegradedCounts {
  degraded: number;
  failOpen: number;
  failClosed: number;
  localFallback: number;
}

const DEGRADED_FIELD: Record<DegradedReason, keyof DegradedCounts> = { 'fail-open': 'failOpen', 'fail-closed': 'failClosed', 'local-fallback': 'localFallback' };

/**
 * Totals of one second, or since start. Checks: `checks` = `allowedChecks` + `deniedChecks`;
 * `limitChecks` of them came through `/v1/limit`, `unknownDomain` named a domain not in the rules.
 * Decisions ({@link RuleCounts}): `allowed` + `throttled`; `otherDenied` decisions admitted by their
 * own limit in a check another limit denied, `unmatched` descriptors no limit applied to.
 * `fallbacks`: store calls answered by a failure mode.
 */
export interface Totals extends RuleCounts, DegradedCounts {
  checks: number;
  allowedChecks: number;
  deniedChecks: number;
  limitChecks: number;
  unknownDomain: number;
  otherDenied: number;
  unmatched: number;
  /** Descriptors decided by a domain's allow list, and by its deny list (rules/lists.ts). */
  allowListed: number;
  denyListed: number;
  /**
   * Descriptors refused by a block (reason `blocked`: a penalty during its block, or a block set
   * by hand; counted in `throttled` too), and penalties started (`block_duration`).
   */
  blocked: number;
  blocksStarted: number;
  rejected: number;
  storeErrors: number;
  fallbacks: number;
  /** Concurrency slots (`/v1/acquire`, `/v1/release`): granted, refused, and releases that freed one. */
  slotsGranted: number;
  slotsRefused: number;
  slotsReleased: number;
}

/**
 * One second as sent: totals, per rule `[rule, allowed, throttled, shadow, near]`, the breaker's
 * state when the second closed and the second's fallbacks by cause.
 */
export interface SecondSnapshot extends Totals {
  t: number;
  rules: [string, number, number, number, number][];
  breaker: BreakerState;
  fallbacksBy: CauseCounts;
}

export const zeroCounts = (): RuleCounts => ({ allowed: 0, throttled: 0, shadow: 0, near: 0 });
const zeroDegraded = (): DegradedCounts => ({ degraded: 0, failOpen: 0, failClosed: 0, localFallback: 0 });
export const zeroTotals = (): Totals => ({
  ...zeroCounts(),
  ...zeroDegraded(),
  checks: 0,
  allowedChecks: 0,
  deniedChecks: 0,
  limitChecks: 0,
  unknownDomain: 0,
  otherDenied: 0,
  unmatched: 0,
  allowListed: 0,
  denyListed: 0,
  blocked: 0,
  blocksStarted: 0,
  rejected: 0,
  storeErrors: 0,
  fallbacks: 0,
  slotsGranted: 0,
  slotsRefused: 0,
  slotsReleased: 0,
});

/** A listed rule with its totals. */
export interface ListedRule extends RuleCounts {
  rule: string;
  domain: string;
}

/**
 * Space-Saving: the most frequent of an unbounded stream of keys in `slots` counters. A key not
 * held replaces the smallest counter, inheriting its count as its possible overcount (`error`).
 */
export class TopKeys {
  private readonly counts = new Map<string, { count: number; error: number }>();

  constructor(private readonly slots: number) {}

  add(key: string, amount = 1, error = 0): void {
    const entry = this.counts.get(key);
    if (entry !== undefined) {
      entry.count += amount;
      entry.error += error;
      return;
    }
    if (this.counts.size < this.slots) {
      this.counts.set(key, { count: amount, error });
      return;
    }
    let minKey: string | undefined;
    let min = Infinity;
    for (const [held, { count }] of this.counts) {
      if (count < min) {
        min = count;
        minKey = held;
      }
    }
    this.counts.delete(minKey!);
    this.counts.set(key, { count: min + amount, error: min + error });
  }

  top(n: number): { key: string; count: number; error: number }[] {
    return [...this.counts]
      .map(([key, { count, error }]) => ({ key, count, error }))
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))
      .slice(0, n);
  }

  get size(): number {
    return this.counts.size;
  }
}

/** The busiest of `rules` (by decisions). */
export function busiest(rules: Iterable<ListedRule>): ListedRule[] {
  return [...rules].sort((a, b) => b.allowed + b.throttled - (a.allowed + a.throttled) || (a.rule < b.rule ? -1 : 1)).slice(0, MAX_LISTED_RULES);
}

/** The most throttled of `rules`. */
export function mostThrottled(rules: Iterable<ListedRule>): { rule: string; throttled: number; allowed: number }[] {
  return [...rules]
    .filter((c) => c.throttled > 0)
    .map(({ rule, throttled, allowed }) => ({ rule, throttled, allowed }))
    .sort((a, b) => b.throttled - a.throttled || (a.rule < b.rule ? -1 : 1))
    .slice(0, TOP_N);
}

/** The aggregate behind the dashboard: fed by the event stream, read once a second. */
export class DashboardAggregate {
  private second = zeroTotals();
  private secondRules = new Map<string, RuleCounts>();
  readonly totals = zeroTotals();
  private readonly ruleTotals = new Map<string, ListedRule>();
  private readonly keys = new TopKeys(KEY_SLOTS);
  /** Checks naming a domain not in the rules, by that domain (bounded: later ones under `(other)`). */
  readonly unknownDomains = new BoundedCounts(UNKNOWN_DOMAIN_CAP);
  private readonly history: SecondSnapshot[] = [];
  lastStoreError: { kind: string; at: number } | undefined;
  /** Store errors in the last few seconds (for the store's state). */
  private recentStoreErrors: number[] = [];
  private readonly fallbackRate = new FallbackRate();
  /** The decision latency over the last seconds, from the metrics' histogram (no second observe per check). */
  readonly latency: LatencyWindow | undefined;

  /** `latencyBuckets`: the check-duration histogram's bucket counts since start, all transports. */
  constructor(
    private readonly ctx: ServiceContext,
    latencyBuckets?: { readonly bounds: readonly number[]; counts(): number[] },
  ) {
    this.latency = latencyBuckets === undefined ? undefined : new LatencyWindow(latencyBuckets.bounds, () => latencyBuckets.counts());
  }

  private ruleName(rule: string): string {
    return this.ruleTotals.has(rule) || this.ruleTotals.size < MAX_RULES ? rule : OTHER_RULES;
  }

  private countCheck(event: CheckEvent): void {
    const second = this.second;
    second.checks += 1;
    if (event.result.overallCode === 'OVER_LIMIT') second.deniedChecks += 1;
    else second.allowedChecks += 1;
    if (event.via === 'limit') second.limitChecks += 1;
    else if (this.ctx.holder.current.domain(event.domain) === undefined) {
      second.unknownDomain += 1;
      this.unknownDomains.add(event.domain);
    }
    const degraded = event.result.degraded;
    if (degraded !== undefined) {
      second.degraded += 1;
      second[DEGRADED_FIELD[degraded]] += 1;
    }
  }

  onCheck(event: CheckEvent): void {
    this.countCheck(event);
    for (const outcome of classifyCheck(this.ctx.holder.current, event)) {
      if (outcome.rule === NO_RULE) {
        this.second.unmatched += 1;
        continue;
      }
      // Denied only because another limit of the request denied it: neither admitted nor throttled here.
      if (outcome.reason === 'other_limit_exceeded') {
        this.second.otherDenied += 1;
        continue;
      }
      const rule = this.ruleName(outcome.rule);
      let total = this.ruleTotals.get(rule);
      if (total === undefined) {
        total = { ...zeroCounts(), rule, domain: rule === OTHER_RULES ? '' : outcome.domain };
        this.ruleTotals.set(rule, total);
      }
      let now = this.secondRules.get(rule);
      if (now === undefined) {
        now = zeroCounts();
        this.secondRules.set(rule, now);
      }
      const bump = (field: keyof RuleCounts): void => {
        now[field] += 1;
        total[field] += 1;
        this.second[field] += 1;
      };
      if (outcome.reason === 'allow_list') this.second.allowListed += 1;
      if (outcome.reason === 'deny_list') this.second.denyListed += 1;
      if (outcome.reason === 'blocked') this.second.blocked += 1;
      if (outcome.blockStarted === true) this.second.blocksStarted += 1;
      if (outcome.result === 'over_limit') {
        bump('throttled');
        // A block set by hand has no counter key: its entry is in the block list, not a key here.
        if (outcome.rule !== BLOCKED_RULE && outcome.reason !== 'deny_list') this.addKey(outcome.key ?? outcome.rule);
      } else {
        bump('allowed');
      }
      if (outcome.result === 'shadow_over_limit') bump('shadow');
      if (outcome.near) bump('near');
    }
  }

  private addKey(key: string): void {
    this.keys.add(key.length > MAX_KEY_CHARS ? `${key.slice(0, MAX_KEY_CHARS)}…` : key);
  }

  onRejected(_event: RejectedEvent): void {
    this.second.rejected += 1;
  }

  onSlot(event: SlotEvent): void {
    if (event.op === 'release') this.second.slotsReleased += event.allowed ? 1 : 0;
    else if (event.allowed) this.second.slotsGranted += 1;
    else this.second.slotsRefused += 1;
  }

  onStoreError(event: StoreErrorEvent): void {
    this.second.storeErrors += 1;
    this.lastStoreError = { kind: event.kind.slice(0, 64), at: Date.now() };
  }

  /**
   * Closes the current second: adds it to the totals and the history; returns it. `health` is the
   * limiter's, read now: its fallback totals' increase are the second's fallbacks.
   */
  roll(t: number, health: StoreHealthSnapshot = this.ctx.limiter.health()): SecondSnapshot {
    const fallbacksBy = this.fallbackRate.delta(health);
    this.second.fallbacks = sumCauses(fallbacksBy);
    const second: SecondSnapshot = {
      ...this.second,
      t,
      rules: [...this.secondRules].map(([rule, c]) => [rule, c.allowed, c.throttled, c.shadow, c.near]),
      breaker: health.breaker,
      fallbacksBy,
    };
    for (const field of Object.keys(this.totals) as (keyof Totals)[]) this.totals[field] += this.second[field];
    this.recentStoreErrors.push(this.second.storeErrors);
    if (this.recentStoreErrors.length > 10) this.recentStoreErrors.shift();
    this.second = zeroTotals();
    this.secondRules = new Map();
    this.history.push(second);
    if (this.history.length > HISTORY_SECONDS) this.history.shift();
    this.latency?.roll();
    return second;
  }

  /** The totals including the second not yet closed (what a merge over workers sums). */
  liveTotals(): Totals {
    const live = { ...this.totals };
    for (const field of Object.keys(live) as (keyof Totals)[]) live[field] += this.second[field];
    return live;
  }

  recentHistory(): readonly SecondSnapshot[] {
    return this.history;
  }

  storeErrorsLast10s(): number {
    return this.recentStoreErrors.reduce((a, b) => a + b, 0);
  }

  /** Every tracked rule with its totals (at most {@link MAX_RULES} + 1). */
  allRules(): Iterable<ListedRule> {
    return this.ruleTotals.values();
  }

  /** The busiest rules (by decisions) with their totals. */
  listedRules(): ListedRule[] {
    return busiest(this.ruleTotals.values());
  }

  topRules(): { rule: string; throttled: number; allowed: number }[] {
    return mostThrottled(this.ruleTotals.values());
  }

  topKeys(n = TOP_N): { key: string; throttled: number; error: number }[] {
    return this.keys.top(n).map(({ key, count, error }) => ({ key, throttled: count, error }));
  }

  latencySummary(): LatencySummary | undefined {
    return this.latency?.summary();
  }
}
