/**
 * `simulate()`: replays log entries against rules offline, with the real algorithms. Each run (the
 * rules as written, or every limit on one algorithm) has its own limiter over its own memory store,
 * and every decision is given the entry's time as `now`: simulated time, no waiting, no clock read.
 * All runs (and the reference of `compareTo`) decide each entry in turn, so the log is read once
 * and may be any async iterable.
 */
import { InvalidOptionError, describeValue } from '../errors.js';
import { checkWholeNumbers, type WholeNumberRange } from '../options.js';
import { ALGORITHMS, type AlgorithmName } from '../policy.js';
import type { CheckRequest, CheckResult } from '../rules/check.js';
import { createLimiter, type Limiter } from '../rules/create-limiter.js';
import type { DomainConfig } from '../rules/types.js';
import { memoryStore } from '../store/memory.js';
import { requestsFor, type LogMapping } from './mapping.js';
import { RuleStats, isOver, type StatsBounds } from './rule-stats.js';
import { rulesForRun, type RunRules, type RunVariant } from './rules-for-run.js';
import type { LogEntry, SimulationReport, SimulationRun } from './types.js';

/** Options of {@link simulate}. */
export interface SimulateOptions {
  /** The rules, as `loadDomainConfigs(path)` reads them (validated, not yet compiled). */
  readonly rules: readonly DomainConfig[];
  /**
   * The log, in time order (an entry earlier than one before it is decided at the latest time
   * seen): entries, or batches of entries (what `readAccessLog` gives; fewer awaits).
   */
  readonly entries: AsyncIterable<LogEntry | readonly LogEntry[]> | Iterable<LogEntry | readonly LogEntry[]>;
  /** How each entry becomes check requests. */
  readonly mapping: LogMapping;
  /**
   * One run per algorithm (or variant: an algorithm with more `rate_limit` fields and a label),
   * every limit on it; default one run with the rules' own algorithms.
   */
  readonly algorithms?: readonly (AlgorithmName | RunVariant)[];
  /** Count, per limit and run, the decisions that differ from this algorithm's (or variant's) on the same traffic. */
  readonly compareTo?: AlgorithmName | RunVariant;
  /** Busiest keys reported per limit (default 10). */
  readonly topKeys?: number;
  /** Keys tracked per busiest-keys list (default 1,000): counts are exact while a limit has fewer keys. */
  readonly trackedKeys?: number;
  /** Most timeline buckets per limit (default 240); buckets widen from one minute to fit. */
  readonly maxBuckets?: number;
  /** Keys of each run's memory store (default 1,000,000): beyond it the least recently used start fresh. */
  readonly maxStoreKeys?: number;
}

/** One run being replayed. */
interface Replay {
  readonly algorithm: string;
  readonly rules: RunRules;
  readonly limiter: Limiter;
  readonly stats: Map<string, RuleStats>;
  requests: number;
  allowed: number;
  throttled: number;
}

/** Replays `entries` and reports, per run and limit, what was allowed, throttled, by whom and when. */
export async function simulate(options: SimulateOptions): Promise<SimulationReport> {
  const bounds = boundsOf(options);
  const variants = checkVariants(options.algorithms ?? [], '--algorithm');
  const compareTo = options.compareTo === undefined ? undefined : checkVariants([options.compareTo], '--compare-to')[0];
  const replayer = new Replayer(options, bounds, variants, compareTo);
  try {
    for await (const item of options.entries) {
      // Awaited only when a decision was a promise (shadow-mode limits): an await per entry would cost more than deciding it.
      for (const entry of isBatch(item) ? item : [item]) {
        const pending = replayer.entry(entry);
        if (pending !== undefined) await pending;
      }
    }
  } finally {
    await replayer.close();
  }
  return replayer.report();
}

/** The runs of one simulation, fed one entry at a time, on a clock that is the entries' time. */
class Replayer {
  private simulatedNow = 0;
  private entries = 0;
  private unmapped = 0;
  private outOfOrder = 0;
  private start: number | undefined;
  private readonly runs: Replay[];
  private readonly reference: Replay | undefined;

  constructor(
    private readonly options: SimulateOptions,
    private readonly bounds: StatsBounds,
    variants: readonly RunVariant[],
    private readonly compareTo: RunVariant | undefined,
  ) {
    this.runs = variants.length === 0 ? [this.replay(undefined)] : variants.map((variant) => this.replay(variant));
    this.reference = compareTo === undefined ? undefined : this.replay(compareTo);
  }

  /** Decides one entry in every run; a promise only when some decision was one. */
  entry(entry: LogEntry): Promise<void> | undefined {
    this.entries += 1;
    if (typeof entry.time !== 'number' || !Number.isFinite(entry.time) || entry.time < 0) {
      throw new InvalidOptionError(`simulate: entry ${this.entries}${entry.line === undefined ? '' : ` (line ${entry.line})`} has time ${describeValue(entry.time)}; give each entry its time in epoch ms`);
    }
    if (entry.time < this.simulatedNow) this.outOfOrder += 1;
    else this.simulatedNow = entry.time;
    const requests = requestsFor(this.options.mapping, entry, this.simulatedNow);
    if (requests.length === 0) {
      this.unmapped += 1;
      return undefined;
    }
    this.start ??= this.simulatedNow;
    let pending: Promise<void> | undefined;
    for (const request of requests) pending = pending === undefined ? this.request(request) : pending.then(() => this.request(request));
    return pending;
  }

  /** One request in every run (and the reference); the runs' limiters are apart, so they may decide together. */
  private request(request: CheckRequest): Promise<void> | undefined {
    const expected = this.reference?.limiter.decideCheck(request);
    const answers = this.runs.map((run) => run.limiter.decideCheck(request));
    const now = this.simulatedNow;
    if (expected instanceof Promise || answers.some((answer) => answer instanceof Promise)) {
      return Promise.all([expected, ...answers]).then(([reference, ...results]) => this.record(now, reference, results as CheckResult[]));
    }
    this.record(now, expected, answers as CheckResult[]);
    return undefined;
  }

  private record(now: number, reference: CheckResult | undefined, results: readonly CheckResult[]): void {
    results.forEach((result, i) => count(this.runs[i]!, result, now, this.bounds, reference));
  }

  private replay(variant: RunVariant | undefined): Replay {
    const rules = rulesForRun(this.options.rules, variant);
    const store = memoryStore({ maxKeys: this.options.maxStoreKeys ?? 1_000_000, sweepIntervalMs: 0 });
    // The limiter's clock is the simulated one too: nothing reads the real clock.
    const limiter = createLimiter({ store, clock: () => this.simulatedNow, rules: rules.ruleSet });
    return { algorithm: variant === undefined ? 'rules' : (variant.label ?? variant.algorithm), rules, limiter, stats: new Map(), requests: 0, allowed: 0, throttled: 0 };
  }

  async close(): Promise<void> {
    await Promise.all([...this.runs, ...(this.reference === undefined ? [] : [this.reference])].map((run) => run.limiter.close()));
  }

  report(): SimulationReport {
    return {
      entries: this.entries,
      unmapped: this.unmapped,
      outOfOrder: this.outOfOrder,
      ...(this.start === undefined ? {} : { start: this.start, end: this.simulatedNow }),
      ...(this.compareTo === undefined ? {} : { compareTo: this.compareTo.label ?? this.compareTo.algorithm }),
      runs: this.runs.map(runReport),
    };
  }
}

/** Counts one decided request in one run; `reference` is the reference run's result for it. */
function count(run: Replay, result: CheckResult, now: number, bounds: StatsBounds, reference: CheckResult | undefined): void {
  run.requests += 1;
  if (result.overallCode === 'OK') run.allowed += 1;
  else run.throttled += 1;
  result.statuses.forEach((status, index) => {
    if (status.rule === undefined || status.key === undefined) return;
    let stats = run.stats.get(status.rule);
    if (stats === undefined) {
      const info = run.rules.limits.get(status.rule);
      if (info === undefined) return;
      stats = new RuleStats(status.rule, info, bounds);
      run.stats.set(status.rule, stats);
    }
    stats.record(status.key, isOver(status), now, reference?.statuses[index]);
  });
}

function isBatch(item: LogEntry | readonly LogEntry[]): item is readonly LogEntry[] {
  return Array.isArray(item);
}

function runReport(run: Replay): SimulationRun {
  return {
    algorithm: run.algorithm,
    requests: run.requests,
    allowed: run.allowed,
    throttled: run.throttled,
    rules: [...run.stats.values()].map((stats) => stats.report()),
  };
}

function checkVariants(items: readonly unknown[], flag: string): RunVariant[] {
  if (!Array.isArray(items)) throw new InvalidOptionError(`simulate: algorithms must be a list of ${ALGORITHMS.join(', ')}, got ${describeValue(items)}`);
  const variants = items.map((item): RunVariant => {
    const variant = (typeof item === 'object' && item !== null ? item : { algorithm: item }) as RunVariant;
    if (!(ALGORITHMS as readonly unknown[]).includes(variant.algorithm)) {
      throw new InvalidOptionError(`simulate: ${flag} ${describeValue(variant.algorithm)} is not one of ${ALGORITHMS.join(', ')}`);
    }
    if (variant.label !== undefined && (typeof variant.label !== 'string' || variant.label === '')) throw new InvalidOptionError(`simulate: a run's label must be a non-empty string, got ${describeValue(variant.label)}`);
    if (variant.rateLimit !== undefined && (typeof variant.rateLimit !== 'object' || variant.rateLimit === null)) throw new InvalidOptionError(`simulate: a run's rateLimit must be an object of rate_limit fields, got ${describeValue(variant.rateLimit)}`);
    return variant;
  });
  const labels = variants.map((variant) => variant.label ?? variant.algorithm);
  if (new Set(labels).size !== labels.length) throw new InvalidOptionError(`simulate: ${flag} names a run twice (${labels.join(', ')}); give each once, or label variants apart`);
  return variants;
}

/** The report's bounds (options of {@link simulate}; `--top` is topKeys): their ranges and defaults. */
export const REPORT_BOUNDS = {
  topKeys: { min: 1, max: 1_000, fallback: 10 },
  trackedKeys: { min: 1, max: 100_000, fallback: 1_000 },
  maxBuckets: { min: 1, max: 10_000, fallback: 240 },
} as const satisfies Record<string, WholeNumberRange>;

function boundsOf(options: SimulateOptions): StatsBounds {
  const { topKeys, trackedKeys, maxBuckets } = checkWholeNumbers(REPORT_BOUNDS, (name) => options[name], (name) => `simulate: ${name}`);
  // A busiest-keys list cannot be longer than the keys it tracks.
  return { topKeys, trackedKeys: Math.max(topKeys, trackedKeys), distinctKeys: 100_000, maxBuckets };
}
