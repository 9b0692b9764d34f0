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
    readonly upperBounds: readonly number[],
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

  /** Observations per bucket since start (not cumulative; the last is +Inf), over every label value. */
  bucketCounts(): number[] {
    const counts = new Array<number>(this.upperBounds.length + 1).fill(0);
    for (const series of this.series.values()) for (let i = 0; i < counts.length; i++) counts[i]! += series.counts[i]!;
    return counts;
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

/** p50 and p99 over a window, in ms, and how many observations they are made of. */
export interface LatencySummary {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly count: number;
}

/**
 * The `q` quantile (0..1) of a histogram given as per-bucket counts (not cumulative; the last is
 * +Inf) and upper bounds, as Prometheus' `histogram_quantile` computes it: linear within the
 * bucket the rank falls in; in +Inf, the largest bound. 0 for no observation.
 */
export function bucketQuantile(bounds: readonly number[], counts: readonly number[], q: number): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < counts.length; i++) {
    const count = counts[i]!;
    if (below + count >= rank && count > 0) {
      if (i >= bounds.length) return bounds[bounds.length - 1]!;
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      return lower + (bounds[i]! - lower) * ((rank - below) / count);
    }
    below += count;
  }
  return bounds[bounds.length - 1]!;
}

/** Seconds the dashboard's latency covers. */
export const LATENCY_WINDOW_SECONDS = 10;

/**
 * The latency of the last {@link LATENCY_WINDOW_SECONDS} seconds from a histogram's running bucket
 * counts: a reading each second, the window is the newest minus the oldest. Nothing is observed
 * here, so a check costs no second observe.
 */
export class LatencyWindow {
  private readonly readings: number[][] = [];

  /** `bounds` in seconds, as the histogram's; `read` its per-bucket counts since start. */
  constructor(
    readonly bounds: readonly number[],
    private readonly read: () => number[],
  ) {
    // The first second counts from now.
    this.readings.push(read());
  }

  /** Takes the second's reading. */
  roll(): void {
    this.readings.push(this.read());
    if (this.readings.length > LATENCY_WINDOW_SECONDS + 1) this.readings.shift();
  }

  /** Per-bucket counts over the window, up to now. */
  window(): number[] {
    const now = this.read();
    const oldest = this.readings[0];
    return oldest === undefined ? now : now.map((count, i) => Math.max(0, count - (oldest[i] ?? 0)));
  }

  summary(counts: readonly number[] = this.window()): LatencySummary {
    return summarizeLatency(this.bounds, counts);
  }
}

/** p50 / p99 in ms of per-bucket counts whose bounds are in seconds. */
export function summarizeLatency(bounds: readonly number[], counts: readonly number[]): LatencySummary {
  return {
    p50Ms: bucketQuantile(bounds, counts, 0.5) * 1_000,
    p99Ms: bucketQuantile(bounds, counts, 0.99) * 1_000,
    count: counts.reduce((a, b) => a + b, 0),
  };
}

/** The label counts past a {@link BoundedCounts}' cap are folded into. */
export const OVERFLOW_LABEL = '(other)';
/** Longest value kept as a label (longer ones are cut). */
const MAX_LABEL_CHARS = 100;

/**
 * Counts by a label value that comes from requests (an unknown domain): at most `cap` distinct
 * values, the rest folded into {@link OVERFLOW_LABEL}, so random values cannot grow memory or series.
 */
export class BoundedCounts {
  private readonly counts = new Map<string, number>();

  constructor(readonly cap: number) {}

  /** Counts one for `value`; returns the label it was counted under. */
  add(value: string, amount = 1): string {
    let label = value.length > MAX_LABEL_CHARS ? value.slice(0, MAX_LABEL_CHARS) : value;
    if (!this.counts.has(label) && this.counts.size >= this.cap) label = OVERFLOW_LABEL;
    this.counts.set(label, (this.counts.get(label) ?? 0) + amount);
    return label;
  }

  /** Every label and its count, most first. */
  entries(): [string, number][] {
    return [...this.counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  }
}
