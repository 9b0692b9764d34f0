/**
 * Counting on the hot path without prom-client's per-call cost: prom-client hashes the label object
 * on every `inc` and `observe` (a string built per call). Here a check bumps a plain number found by
 * two Map lookups on label values it already has, and the counts are handed to the registry when
 * /metrics is scraped. Label values stay bounded by the configuration, as before.
 */
import type { Registry } from 'prom-client';

/** Counts by two label values and a small index (a third label from a fixed set). */
export class Tally {
  private readonly rows = new Map<string, Map<string, Float64Array>>();

  constructor(private readonly width: number) {}

  add(first: string, second: string, index: number, amount = 1): void {
    let inner = this.rows.get(first);
    if (inner === undefined) this.rows.set(first, (inner = new Map()));
    let row = inner.get(second);
    if (row === undefined) inner.set(second, (row = new Float64Array(this.width)));
    row[index]! += amount;
  }

  /** Hands every count added since the last drain to `sink`, and forgets it. */
  drain(sink: (first: string, second: string, index: number, amount: number) => void): void {
    for (const [first, inner] of this.rows) {
      for (const [second, row] of inner) {
        for (let i = 0; i < row.length; i++) {
          if (row[i] === 0) continue;
          sink(first, second, i, row[i]!);
          row[i] = 0;
        }
      }
    }
  }
}

interface HistogramSeries {
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** The sample shape prom-client's registry prints. */
interface MetricValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

/**
 * A histogram with one label, observed by plain arithmetic and printed by prom-client's registry
 * (same exposition as prom-client's `Histogram`: `_bucket{le,label}`, `_sum`, `_count`).
 */
export class FastHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, HistogramSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    private readonly upperBounds: readonly number[],
    registers: readonly Registry[],
  ) {
    for (const registry of registers) registry.registerMetric(this as never);
  }

  observe(labelValue: string, value: number): void {
    let series = this.series.get(labelValue);
    if (series === undefined) this.series.set(labelValue, (series = { counts: new Float64Array(this.upperBounds.length + 1), sum: 0, count: 0 }));
    let bucket = 0;
    while (bucket < this.upperBounds.length && value > this.upperBounds[bucket]!) bucket++;
    series.counts[bucket]! += 1;
    series.sum += value;
    series.count += 1;
  }

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValue[] }> {
    const values: MetricValue[] = [];
    for (const [labelValue, series] of this.series) {
      let cumulative = 0;
      for (let i = 0; i <= this.upperBounds.length; i++) {
        cumulative += series.counts[i]!;
        values.push({ value: cumulative, labels: { le: i < this.upperBounds.length ? this.upperBounds[i]! : '+Inf', [this.labelName]: labelValue }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: series.sum, labels: { [this.labelName]: labelValue }, metricName: `${this.name}_sum` });
      values.push({ value: series.count, labels: { [this.labelName]: labelValue }, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  reset(): void {
    this.series.clear();
  }
}
