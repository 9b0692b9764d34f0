/**
 * The dashboard across the workers of `tollgate serve --workers N`. Each worker reports its counts
 * since start (totals, rules, throttled keys, unknown domains, fallbacks) and its latency window;
 * the primary sums them, with what exited workers had counted, once a second, and the second is
 * the increase of the sums since the previous one: exact whatever the phase of each worker's own
 * second, and never negative when a worker is replaced. Every worker receives the merged second
 * and shows it (dashboard.ts); the `workers` rows are the per-worker breakdown.
 */
import type { BreakerState } from '../../limiter/index.js';
import type { CollectedReports } from './workers.js';
import { FALLBACK_CAUSES, sumCauses, zeroCauses, type CauseCounts } from '../observe/dashboard-health.js';
import {
  busiest,
  HISTORY_SECONDS,
  KEY_SLOTS,
  MAX_RULES,
  mostThrottled,
  OTHER_RULES,
  TOP_N,
  TopKeys,
  zeroCounts,
  zeroTotals,
  type ListedRule,
  type RuleCounts,
  type SecondSnapshot,
  type Totals,
} from '../observe/dashboard-aggregate.js';
import { BoundedCounts, summarizeLatency, type LatencySummary } from '../observe/metric-tally.js';
import { CHECK_DURATION_BOUNDS } from '../observe/metrics.js';
import { UNKNOWN_DOMAIN_CAP } from '../check/outcomes.js';

/** What one worker reports (counts since it started, except the latency window, breaker and clients). */
export interface DashboardReport {
  readonly totals: Totals;
  readonly rules: readonly ListedRule[];
  readonly keys: readonly { key: string; throttled: number; error: number }[];
  readonly unknownDomains: readonly [string, number][];
  /** The limiter's fallbacks since start, by cause. */
  readonly fallbacks: CauseCounts;
  /** The check-duration histogram's bucket counts over the last seconds. */
  readonly latency: readonly number[];
  readonly breaker: BreakerState;
  readonly clients: number;
  readonly storeErrorsLast10s: number;
}

/** One worker in the breakdown; `worker` is `exited` for what exited workers had counted. */
export interface WorkerRow {
  readonly worker: number | 'exited';
  readonly pid: number;
  readonly checks: number;
  readonly allowedChecks: number;
  readonly deniedChecks: number;
  readonly decisions: number;
  readonly checksPerSecond: number;
  readonly breaker: BreakerState | '-';
  readonly clients: number;
}

/** The merged second the primary sends every worker. */
export interface ClusterSecond {
  readonly second: SecondSnapshot;
  readonly totals: Totals;
  readonly rules: ListedRule[];
  readonly topRules: ReturnType<typeof mostThrottled>;
  readonly topKeys: { key: string; throttled: number; error: number }[];
  readonly unknownDomains: [string, number][];
  readonly latency: LatencySummary;
  readonly clients: number;
  readonly storeErrorsLast10s: number;
  readonly workers: WorkerRow[];
}

/** Keys a worker reports (its busiest throttled keys; the merge keeps {@link KEY_SLOTS}). */
export const REPORTED_KEYS = 32;

/** The worst breaker state of several: open, then half-open, then closed. */
function worstBreaker(states: readonly BreakerState[]): BreakerState {
  if (states.includes('open')) return 'open';
  return states.includes('half-open') ? 'half-open' : 'closed';
}

function isReport(data: unknown): data is DashboardReport {
  return typeof data === 'object' && data !== null && typeof (data as DashboardReport).totals === 'object';
}

/** Sums reports: counts add up, keys and domains merge, the breaker is the worst. */
export function sumReports(reports: readonly DashboardReport[]): DashboardReport {
  const totals = zeroTotals();
  const rules = new Map<string, ListedRule>();
  const keys = new TopKeys(KEY_SLOTS);
  const unknown = new BoundedCounts(UNKNOWN_DOMAIN_CAP);
  const fallbacks = zeroCauses();
  const latency = new Array<number>(CHECK_DURATION_BOUNDS.length + 1).fill(0);
  for (const report of reports) {
    for (const field of Object.keys(totals) as (keyof Totals)[]) totals[field] += report.totals[field] ?? 0;
    for (const rule of report.rules) {
      const name = rules.has(rule.rule) || rules.size < MAX_RULES ? rule.rule : OTHER_RULES;
      const held = rules.get(name) ?? { ...zeroCounts(), rule: name, domain: name === OTHER_RULES ? '' : rule.domain };
      for (const field of Object.keys(zeroCounts()) as (keyof RuleCounts)[]) held[field] += rule[field];
      rules.set(name, held);
    }
    for (const { key, throttled, error } of report.keys) keys.add(key, throttled, error);
    for (const [domain, count] of report.unknownDomains) unknown.add(domain, count);
    for (const cause of FALLBACK_CAUSES) fallbacks[cause] += report.fallbacks[cause] ?? 0;
    report.latency.forEach((count, i) => (latency[i] = (latency[i] ?? 0) + count));
  }
  return {
    totals,
    rules: [...rules.values()],
    keys: keys.top(KEY_SLOTS).map(({ key, count, error }) => ({ key, throttled: count, error })),
    unknownDomains: unknown.entries(),
    fallbacks,
    latency,
    breaker: worstBreaker(reports.map((report) => report.breaker)),
    clients: reports.reduce((sum, report) => sum + report.clients, 0),
    storeErrorsLast10s: reports.reduce((sum, report) => sum + report.storeErrorsLast10s, 0),
  };
}

/** What exited workers leave: their counts, summed; their latency, breaker and viewers ended with them. */
export function foldDashboardReports(reports: readonly unknown[]): DashboardReport {
  const summed = sumReports(reports.filter(isReport));
  return { ...summed, latency: [], breaker: 'closed', clients: 0, storeErrorsLast10s: 0 };
}

/** `now − before` per field, never below 0. */
function increase<T extends object>(now: T, before: T | undefined): T {
  const out = { ...now };
  for (const field of Object.keys(now) as (keyof T)[]) {
    const value = now[field];
    if (typeof value === 'number') (out[field] as number) = Math.max(0, value - ((before?.[field] as number | undefined) ?? 0));
  }
  return out;
}

/** The primary's merge, once a second: sums, and the second as the increase since the previous merge. */
export class ClusterDashboard {
  private previous: DashboardReport | undefined;
  private readonly previousChecks = new Map<number | 'exited', number>();

  merge(collected: CollectedReports, t: number): ClusterSecond {
    const live = collected.live.filter((report) => isReport(report.data));
    const exited = isReport(collected.exited) ? collected.exited : undefined;
    const summed = sumReports([...live.map((report) => report.data as DashboardReport), ...(exited === undefined ? [] : [exited])]);
    const before = this.previous;
    this.previous = summed;
    const fallbacksBy = increase(summed.fallbacks, before?.fallbacks);
    const beforeRules = new Map(before?.rules.map((rule) => [rule.rule, rule]));
    const rules: SecondSnapshot['rules'] = [];
    for (const rule of summed.rules) {
      const step = increase(rule, beforeRules.get(rule.rule));
      if (step.allowed + step.throttled + step.shadow + step.near > 0) rules.push([rule.rule, step.allowed, step.throttled, step.shadow, step.near]);
    }
    const second: SecondSnapshot = { ...increase(summed.totals, before?.totals), t, rules, breaker: summed.breaker, fallbacksBy, fallbacks: sumCauses(fallbacksBy) };
    return {
      second,
      totals: { ...summed.totals, fallbacks: sumCauses(summed.fallbacks) },
      rules: busiest(summed.rules),
      topRules: mostThrottled(summed.rules),
      topKeys: summed.keys.slice(0, TOP_N),
      unknownDomains: summed.unknownDomains.slice(0, TOP_N),
      latency: summarizeLatency(CHECK_DURATION_BOUNDS, summed.latency),
      clients: summed.clients,
      storeErrorsLast10s: summed.storeErrorsLast10s,
      workers: this.rows(live.map((report) => ({ worker: report.worker, pid: report.pid, data: report.data as DashboardReport })), exited),
    };
  }

  private rows(live: { worker: number; pid: number; data: DashboardReport }[], exited: DashboardReport | undefined): WorkerRow[] {
    const all: { worker: number | 'exited'; pid: number; data: DashboardReport }[] = [...live];
    if (exited !== undefined) all.push({ worker: 'exited', pid: 0, data: exited });
    const rows = all.map(({ worker, pid, data }): WorkerRow => {
      const { checks, allowedChecks, deniedChecks, allowed, throttled } = data.totals;
      const perSecond = Math.max(0, checks - (this.previousChecks.get(worker) ?? checks));
      this.previousChecks.set(worker, checks);
      return { worker, pid, checks, allowedChecks, deniedChecks, decisions: allowed + throttled, checksPerSecond: perSecond, breaker: worker === 'exited' ? '-' : data.breaker, clients: data.clients };
    });
    // Forget workers that are gone (their counts are under `exited` now).
    for (const worker of [...this.previousChecks.keys()]) if (!all.some((row) => row.worker === worker)) this.previousChecks.delete(worker);
    return rows;
  }
}

/** A worker's copy of the merged seconds: the history sent to a viewer that connects. */
export class ClusterHistory {
  latest: ClusterSecond | undefined;
  private readonly seconds: SecondSnapshot[] = [];

  add(merged: ClusterSecond): void {
    this.latest = merged;
    this.seconds.push(merged.second);
    if (this.seconds.length > HISTORY_SECONDS) this.seconds.shift();
  }

  history(): readonly SecondSnapshot[] {
    return this.seconds;
  }
}
