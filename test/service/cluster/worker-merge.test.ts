/**
 * The merges behind `--workers N`, on real prom-client registries and dashboard reports: counters
 * summed with what exited workers left, gauges merged per family, the dashboard's second as the
 * increase of the sums; and the latency quantiles and the capped counts they rest on.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { CollectedReports } from '../../../src/service/cluster/workers.js';
import { zeroTotals } from '../../../src/service/observe/dashboard-aggregate.js';
import { ClusterDashboard, foldDashboardReports, type DashboardReport } from '../../../src/service/cluster/dashboard-merge.js';
import { zeroCauses } from '../../../src/service/observe/dashboard-health.js';
import { BoundedCounts, bucketQuantile, OVERFLOW_LABEL } from '../../../src/service/observe/metric-tally.js';
import { foldMetricReports, mergeWorkerMetrics } from '../../../src/service/cluster/metrics-merge.js';
import { parseMetrics, sampleSum } from '../../support/observability.js';

/** A worker's registry as it reports it: checks, the rules version, pushed version, breaker state. */
async function workerRegistry(checks: number, pushedVersion: number, breakerOpen: boolean): Promise<unknown> {
  const registry = new Registry();
  new Counter({ name: 'tollgate_checks_total', help: 'h', labelNames: ['domain'], registers: [registry] }).inc({ domain: 'd' }, checks);
  new Gauge({ name: 'tollgate_rules_info', help: 'h', labelNames: ['version'], registers: [registry] }).set({ version: 'abc' }, 1);
  new Gauge({ name: 'tollgate_rules_pushed_version', help: 'h', registers: [registry] }).set(pushedVersion);
  const breaker = new Gauge({ name: 'tollgate_store_breaker_state', help: 'h', labelNames: ['state'], registers: [registry] });
  breaker.set({ state: 'open' }, breakerOpen ? 1 : 0);
  breaker.set({ state: 'closed' }, breakerOpen ? 0 : 1);
  return registry.getMetricsAsJSON();
}

async function text(collected: CollectedReports, byWorker = false): Promise<ReturnType<typeof parseMetrics>> {
  return parseMetrics(await mergeWorkerMetrics(collected, byWorker).metrics());
}

describe('metrics merged over workers', () => {
  it('sums counters, merges each gauge family as documented, and keeps exited workers’ counters', async () => {
    const exited = await foldMetricReports([await workerRegistry(7, 3, true)]);
    const collected: CollectedReports = {
      live: [
        { worker: 2, pid: 20, data: await workerRegistry(10, 5, false) },
        { worker: 3, pid: 30, data: await workerRegistry(4, 4, true) },
      ],
      exited,
    };
    const samples = await text(collected);
    expect(sampleSum(samples, 'tollgate_checks_total')).toBe(21);
    expect(sampleSum(samples, 'tollgate_rules_info', { version: 'abc' })).toBe(1);
    expect(sampleSum(samples, 'tollgate_rules_pushed_version')).toBe(4);
    // How many live workers are in each state; the exited worker's gauges are gone.
    expect(sampleSum(samples, 'tollgate_store_breaker_state', { state: 'open' })).toBe(1);
    expect(sampleSum(samples, 'tollgate_store_breaker_state', { state: 'closed' })).toBe(1);

    const perWorker = (await text(collected, true)).filter((s) => s.name === 'tollgate_checks_total');
    expect(perWorker.map((s) => [s.labels.worker, s.value])).toEqual([['2', 10], ['3', 4], ['exited', 7]]);
  });

  it('folds exited workers together, counters only', async () => {
    const first = await foldMetricReports([await workerRegistry(7, 3, true)]);
    const both = await foldMetricReports([first, await workerRegistry(5, 9, false)]);
    const samples = await text({ live: [], exited: both });
    expect(sampleSum(samples, 'tollgate_checks_total')).toBe(12);
    expect(samples.filter((s) => s.name !== 'tollgate_checks_total')).toEqual([]);
  });
});

function report(checks: number, denied: number, extra: Partial<DashboardReport> = {}): DashboardReport {
  return {
    totals: { ...zeroTotals(), checks, allowedChecks: checks - denied, deniedChecks: denied, allowed: checks - denied, throttled: denied },
    rules: [{ rule: 'd.k', domain: 'd', allowed: checks - denied, throttled: denied, shadow: 0, near: 0 }],
    keys: [],
    unknownDomains: [],
    fallbacks: zeroCauses(),
    latency: [],
    breaker: 'closed',
    clients: 0,
    storeErrorsLast10s: 0,
    ...extra,
  };
}

describe('the dashboard merged over workers', () => {
  it('gives each second as the increase of the sums, never negative when a worker is replaced', () => {
    const merge = new ClusterDashboard();
    const first = merge.merge({ live: [{ worker: 1, pid: 10, data: report(10, 2) }, { worker: 2, pid: 20, data: report(5, 0, { breaker: 'half-open' }) }], exited: undefined }, 1_000);
    expect(first.totals).toMatchObject({ checks: 15, allowedChecks: 13, deniedChecks: 2 });
    expect(first.second.breaker).toBe('half-open');
    expect(first.workers.map((row) => [row.worker, row.checks])).toEqual([[1, 10], [2, 5]]);

    const second = merge.merge({ live: [{ worker: 1, pid: 10, data: report(14, 3) }, { worker: 2, pid: 20, data: report(5, 0) }], exited: undefined }, 2_000);
    expect(second.second).toMatchObject({ checks: 4, allowedChecks: 3, deniedChecks: 1, allowed: 3, throttled: 1 });
    expect(second.second.rules).toEqual([['d.k', 3, 1, 0, 0]]);

    // Worker 1 dies: its last report is kept under `exited`; worker 3 starts from zero.
    const exited = foldDashboardReports([report(14, 3)]);
    const third = merge.merge({ live: [{ worker: 2, pid: 20, data: report(6, 0) }, { worker: 3, pid: 30, data: report(2, 1) }], exited }, 3_000);
    expect(third.totals.checks).toBe(22);
    expect(third.second).toMatchObject({ checks: 3, deniedChecks: 1 });
    expect(third.workers.map((row) => [row.worker, row.checks, row.breaker])).toEqual([[2, 6, 'closed'], [3, 2, 'closed'], ['exited', 14, '-']]);
  });

  it('merges throttled keys and unknown domains by summing their counts', () => {
    const merged = new ClusterDashboard().merge(
      {
        live: [
          { worker: 1, pid: 1, data: report(3, 3, { keys: [{ key: 'a', throttled: 2, error: 0 }], unknownDomains: [['typo', 2]] }) },
          { worker: 2, pid: 2, data: report(3, 3, { keys: [{ key: 'a', throttled: 1, error: 0 }, { key: 'b', throttled: 2, error: 0 }], unknownDomains: [['typo', 1]] }) },
        ],
        exited: undefined,
      },
      1_000,
    );
    expect(merged.topKeys.map((k) => [k.key, k.throttled])).toEqual([['a', 3], ['b', 2]]);
    expect(merged.unknownDomains).toEqual([['typo', 3]]);
  });
});

describe('latency quantiles and capped counts', () => {
  const bounds = [0.001, 0.01, 0.1];
  it.each([
    { counts: [0, 0, 0, 0], q: 0.5, expected: 0 },
    { counts: [10, 0, 0, 0], q: 0.5, expected: 0.0005 },
    { counts: [0, 10, 0, 0], q: 0.5, expected: 0.0055 },
    { counts: [50, 50, 0, 0], q: 0.99, expected: 0.001 + 0.009 * 0.98 },
    { counts: [0, 0, 0, 5], q: 0.99, expected: 0.1 },
  ])('bucket counts $counts give the $q quantile $expected', ({ counts, q, expected }) => {
    expect(bucketQuantile(bounds, counts, q)).toBeCloseTo(expected, 9);
  });

  it('names at most `cap` values, the rest under (other)', () => {
    const counts = new BoundedCounts(2);
    for (const value of ['a', 'b', 'c', 'a', 'd']) counts.add(value);
    expect(counts.entries()).toEqual([[OVERFLOW_LABEL, 2], ['a', 2], ['b', 1]]);
    expect(counts.add('x'.repeat(500))).toBe(OVERFLOW_LABEL);
  });
});
