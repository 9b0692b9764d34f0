/**
 * /metrics across the workers of `tollgate serve --workers N`: the workers' registries (prom-client's
 * JSON, collected by the primary, workers.ts) merged with prom-client's `AggregatorRegistry.aggregate`.
 *
 * Counters and histograms are summed, with what exited workers had counted, so a counter never goes
 * back when a worker dies and the primary starts another. Each gauge family is merged as
 * {@link GAUGE_AGGREGATION} says. `?by=worker` gives the same families per worker instead, each
 * series with a `worker` label (the worker's id, `exited` for what exited workers left).
 */
import { AggregatorRegistry, type Aggregator, type Registry } from 'prom-client';
import type { CollectedReports } from './workers.js';

/** One family as `registry.getMetricsAsJSON()` gives it. */
interface MetricFamily {
  name: string;
  type: string;
  aggregator?: Aggregator;
  values: { labels: Record<string, string | number>; value: number; metricName?: string }[];
}

/**
 * How a gauge family is merged over the workers (a gauge not listed is summed, as prom-client
 * does: in-flight calls, keys held, views, memory). A state that every worker should share is the
 * largest one (rules in force, a failing reload), the version of pushed rules the smallest (the
 * one that lags), the time since the store answered the longest (the worst worker). The breaker's
 * state stays summed: `{state="open"} 1` means one worker has its breaker open.
 */
export const GAUGE_AGGREGATION: Readonly<Record<string, Aggregator>> = {
  tollgate_rules_info: 'max',
  tollgate_rules_domains: 'max',
  tollgate_rules_rules: 'max',
  tollgate_rules_reload_failing: 'max',
  tollgate_rules_pushed_version: 'min',
  tollgate_store_seconds_since_healthy: 'max',
};

/** The label that says which worker a series comes from, in `?by=worker`. */
export const WORKER_LABEL = 'worker';
/** The `worker` label of what exited workers had counted. */
export const EXITED_WORKERS = 'exited';

function families(data: unknown): MetricFamily[] {
  return Array.isArray(data) ? (data as MetricFamily[]) : [];
}

/** A family with its aggregation for merging over workers. */
function withAggregation(family: MetricFamily): MetricFamily {
  const aggregator = family.type === 'gauge' ? GAUGE_AGGREGATION[family.name] : undefined;
  return aggregator === undefined ? family : { ...family, aggregator };
}

/** What exited workers leave: their counters and histograms, summed (their gauges ended with them). */
export function foldMetricReports(reports: readonly unknown[]): Promise<unknown> {
  const kept = reports.map((report) => families(report).filter((family) => family.type === 'counter' || family.type === 'histogram'));
  return AggregatorRegistry.aggregate(kept).getMetricsAsJSON();
}

/** Every family of `data` with one more label on each series. */
function labelled(data: unknown, worker: string): MetricFamily[] {
  return families(data).map((family) => ({ ...family, values: family.values.map((value) => ({ ...value, labels: { ...value.labels, [WORKER_LABEL]: worker } })) }));
}

/**
 * The workers' metrics as one registry: summed (and merged by family) by default, or one series
 * per worker (`byWorker`).
 */
export function mergeWorkerMetrics(collected: CollectedReports, byWorker: boolean): Registry {
  const exited = collected.exited === undefined ? [] : [collected.exited];
  if (byWorker) {
    const parts = collected.live.map((report) => labelled(report.data, String(report.worker)));
    if (exited.length > 0) parts.push(labelled(exited[0], EXITED_WORKERS));
    return AggregatorRegistry.aggregate(parts);
  }
  const parts = [...collected.live.map((report) => report.data), ...exited].map((data) => families(data).map(withAggregation));
  return AggregatorRegistry.aggregate(parts);
}
