/**
 * The report as a terminal table: per limit, one row per run (side by side when algorithms are
 * compared), then its busiest keys and a one-line chart of when throttling happened. Colours only
 * when asked (the CLI asks on a TTY).
 */
import { ALGORITHMS } from '../algorithms/catalog.js';
import type { RuleReport, SimulationReport, SimulationRun, TimeBucket, TopKey } from './types.js';

/** What the log reader found, for the report's first lines. */
export interface LogSummary {
  readonly file: string;
  readonly format: string | undefined;
  readonly lines: number;
  readonly parsed: number;
  readonly malformed: number;
  readonly problems: readonly { readonly line: number; readonly reason: string }[];
}

const SPARKS = '▁▂▃▄▅▆▇█';
const CHART_COLUMNS = 60;
const SHOWN_KEYS = 5;

/** Renders the report; `colour` adds ANSI colours (throttled in red). */
export function renderText(report: SimulationReport, log: LogSummary | undefined, colour: boolean): string {
  const red = (text: string): string => (colour ? `\x1b[31m${text}\x1b[0m` : text);
  const bold = (text: string): string => (colour ? `\x1b[1m${text}\x1b[0m` : text);
  const lines: string[] = [];
  if (log !== undefined) lines.push(logLine(log));
  lines.push(`${report.entries} requests replayed${report.unmapped > 0 ? ` (${report.unmapped} made no descriptor)` : ''}${report.outOfOrder > 0 ? `, ${report.outOfOrder} out of order (decided at the latest time seen)` : ''}${spanText(report)}`);
  for (const run of report.runs) {
    lines.push(`run ${run.algorithm === 'rules' ? "rules (each limit's own algorithm)" : run.algorithm}: ${run.requests} checks, ${run.allowed} allowed, ${run.throttled > 0 ? red(`${run.throttled} throttled`) : '0 throttled'}`);
  }
  lines.push('');
  const header = ['rule', 'limit', 'algorithm', 'requests', 'allowed', 'throttled', '%'];
  if (report.compareTo !== undefined) header.push(`allowed only here / only by ${report.compareTo}`);
  const rows: string[][] = [header];
  for (const [rule, perRun] of byRule(report.runs)) {
    for (const [run, stats] of perRun) rows.push(tableRow(rule, run, stats, report.compareTo !== undefined));
  }
  lines.push(...table(rows).map((line, i) => (i === 0 ? bold(line) : line)));
  for (const [rule, perRun] of byRule(report.runs)) {
    for (const [run, stats] of perRun) lines.push('', ...ruleDetails(rule, report.runs.length > 1 ? run.algorithm : undefined, stats, red));
  }
  return `${lines.join('\n')}\n`;
}

function logLine(log: LogSummary): string {
  const problems = log.problems.map((problem) => `line ${problem.line}: ${problem.reason}`).join('; ');
  const malformed = log.malformed === 0 ? '' : `, ${log.malformed} malformed (${problems}${log.malformed > log.problems.length ? '; ...' : ''})`;
  return `${log.file}: ${log.lines} lines, ${log.format ?? 'empty'} format, ${log.parsed} parsed${malformed}`;
}

function spanText(report: SimulationReport): string {
  if (report.start === undefined || report.end === undefined) return '';
  return `, ${isoMinute(report.start)} → ${isoMinute(report.end)} UTC`;
}

function isoMinute(time: number): string {
  return new Date(time).toISOString().slice(0, 19).replace('T', ' ');
}

/** Each limit (in the order first met across runs) with its report in every run that met it. */
function byRule(runs: readonly SimulationRun[]): Map<string, [SimulationRun, RuleReport][]> {
  const rules = new Map<string, [SimulationRun, RuleReport][]>();
  for (const run of runs) {
    for (const stats of run.rules) {
      const list = rules.get(stats.rule) ?? [];
      list.push([run, stats]);
      rules.set(stats.rule, list);
    }
  }
  return rules;
}

function tableRow(rule: string, run: SimulationRun, stats: RuleReport, compared: boolean): string[] {
  const share = stats.requests === 0 ? 0 : (stats.throttled / stats.requests) * 100;
  const row = [
    `${rule}${stats.shadowMode ? ' (shadow)' : ''}`,
    stats.limit,
    // The limit's own algorithm (a quota-mode limit keeps fixed-window in every run), or a variant's label.
    run.algorithm === 'rules' || (ALGORITHMS as readonly string[]).includes(run.algorithm) ? stats.algorithm : run.algorithm,
    String(stats.requests),
    String(stats.allowed),
    String(stats.throttled),
    `${share.toFixed(1)}%`,
  ];
  if (compared) row.push(stats.difference === undefined ? '-' : `${stats.difference.allowedOnlyHere} / ${stats.difference.allowedOnlyByReference}`);
  return row;
}

/** Left-aligned text columns, right-aligned numbers. */
function table(rows: readonly string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)));
  return rows.map((row) =>
    row
      .map((cell, column) => (column >= 3 ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd(),
  );
}

function ruleDetails(rule: string, algorithm: string | undefined, stats: RuleReport, red: (text: string) => string): string[] {
  const lines = [`${rule}${algorithm === undefined ? '' : ` [${algorithm}]`}:`];
  lines.push(`  busiest keys: ${keyList(stats.topByRequests)}`);
  if (stats.throttled > 0) {
    lines.push(`  most throttled: ${red(keyList(stats.topByThrottled))}`);
    lines.push(`  throttled over time: ${sparkline(stats.timeline.buckets, (bucket) => bucket.throttled)} (${chartScale(stats)})`);
    const worst = stats.timeline.buckets.reduce((a, b) => (b.throttled > a.throttled ? b : a));
    lines.push(`  most throttling at ${isoMinute(worst.start)} UTC: ${worst.throttled} in ${describeMs(stats.timeline.bucketMs)}`);
  }
  return lines;
}

function keyList(keys: readonly TopKey[]): string {
  if (keys.length === 0) return '-';
  return keys
    .slice(0, SHOWN_KEYS)
    .map((key) => `${key.key} ${key.error > 0 ? `≤${key.count} (≥${key.count - key.error})` : key.count}`)
    .join(', ');
}

/** At most CHART_COLUMNS characters, each the sum of consecutive buckets, scaled to the highest. */
function sparkline(buckets: readonly TimeBucket[], value: (bucket: TimeBucket) => number): string {
  const perColumn = Math.ceil(buckets.length / CHART_COLUMNS);
  const columns: number[] = [];
  buckets.forEach((bucket, i) => {
    const column = Math.floor(i / perColumn);
    columns[column] = (columns[column] ?? 0) + value(bucket);
  });
  const highest = Math.max(...columns, 1);
  return columns.map((count) => (count === 0 ? ' ' : SPARKS[Math.min(SPARKS.length - 1, Math.floor((count / highest) * SPARKS.length))])).join('');
}

function chartScale(stats: RuleReport): string {
  const perColumn = Math.ceil(stats.timeline.buckets.length / CHART_COLUMNS);
  return `1 character = ${describeMs(stats.timeline.bucketMs * perColumn)}`;
}

function describeMs(ms: number): string {
  const minutes = ms / 60_000;
  if (minutes < 60) return minutes === 1 ? '1 minute' : `${minutes} minutes`;
  const hours = minutes / 60;
  return Number.isInteger(hours) ? `${hours} hour${hours === 1 ? '' : 's'}` : `${minutes} minutes`;
}
