/**
 * Reads an access log as a stream of {@link LogEntry}, in batches: one per chunk of the file
 * stream (1 MiB), split into lines here (so memory does not grow with the log, and a million lines
 * cost a few thousand awaits rather than a million), in a format given or detected from the first line.
 * Malformed lines are counted and the first few kept with their line numbers; `strict` stops at
 * the first one.
 */
import { createReadStream, statSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { InvalidLogError, InvalidOptionError } from '../errors.js';
import { COMBINED_FIELDS, CLF_FIELDS, LineProblem, TimeCache, isCombinedLine, parseClfLine } from './log-clf.js';
import { jsonFieldNames, parseJsonLine, type JsonFieldMap } from './log-json.js';
import type { LogEntry } from './types.js';

export const LOG_FORMATS = ['clf', 'combined', 'jsonl'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** How many malformed lines are kept with their numbers (the rest are only counted). */
export const KEPT_PROBLEMS = 5;

export interface ReadLogOptions {
  /** Default: detected from the first non-blank line (`{` → jsonl, else combined or clf). */
  readonly format?: LogFormat;
  readonly jsonFields: JsonFieldMap;
  /** Stop at the first malformed line with an {@link InvalidLogError}. */
  readonly strict?: boolean;
  /** Called now and then with the bytes read so far and the file's size. */
  readonly onProgress?: (bytesRead: number, size: number) => void;
}

/** What reading the log found; filled in as the entries are read. */
export interface LogStats {
  readonly file: string;
  format: LogFormat | undefined;
  lines: number;
  parsed: number;
  malformed: number;
  /** The first {@link KEPT_PROBLEMS} malformed lines. */
  readonly problems: { line: number; reason: string }[];
}

/** A log being read: iterate `entries` once (batches of entries, in order); `stats` is complete when the iteration ends. */
export interface AccessLog {
  readonly entries: AsyncIterable<readonly LogEntry[]>;
  readonly stats: LogStats;
}

/** Opens `file` for reading; throws {@link InvalidOptionError} when it is not a readable file. */
export function readAccessLog(file: string, options: ReadLogOptions): AccessLog {
  let size: number;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) throw new Error('not a regular file');
    size = stat.size;
  } catch (error) {
    throw new InvalidOptionError(`simulate: --log ${JSON.stringify(file)} cannot be read (${(error as Error).message.replace(/^[A-Z]+: /, '')}); give an access log file`);
  }
  const stats: LogStats = { file, format: options.format, lines: 0, parsed: 0, malformed: 0, problems: [] };
  return { entries: entriesOf(file, size, options, stats), stats };
}

/** The field names a log of `format` gives (`header.NAME` too for jsonl). */
export function fieldsOf(format: LogFormat, jsonFields: JsonFieldMap): readonly string[] {
  if (format === 'clf') return CLF_FIELDS;
  if (format === 'combined') return COMBINED_FIELDS;
  return jsonFieldNames(jsonFields);
}

/** Detects the format of a log from its first non-blank line. */
export function detectFormat(line: string): LogFormat {
  if (line.trimStart().startsWith('{')) return 'jsonl';
  return isCombinedLine(line) ? 'combined' : 'clf';
}

async function* entriesOf(file: string, size: number, options: ReadLogOptions, stats: LogStats): AsyncGenerator<LogEntry[]> {
  const stream = createReadStream(file, { highWaterMark: 1 << 20 });
  const decoder = new StringDecoder('utf8');
  const times = new TimeCache();
  let partial = '';
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const lines = (partial + decoder.write(chunk)).split('\n');
      partial = lines.pop()!;
      yield* parseLines(lines, file, options, stats, times);
      options.onProgress?.(stream.bytesRead, size);
    }
    const last = partial + decoder.end();
    if (last !== '') yield* parseLines([last], file, options, stats, times);
  } finally {
    stream.destroy();
  }
}

/** The entries of some lines, as one batch; with `strict`, the entries before a bad line, then its error. */
function* parseLines(lines: readonly string[], file: string, options: ReadLogOptions, stats: LogStats, times: TimeCache): Generator<LogEntry[]> {
  const entries: LogEntry[] = [];
  for (let text of lines) {
    stats.lines += 1;
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (stats.lines === 1 && text.startsWith('\uFEFF')) text = text.slice(1); // a byte order mark
    if (text.trim() === '') continue;
    stats.format ??= detectFormat(text);
    const entry = parseLine(text, stats.format, options, times);
    if (entry instanceof LineProblem) {
      if (options.strict === true) {
        if (entries.length > 0) yield entries;
        throw new InvalidLogError(file, stats.lines, entry.reason);
      }
      recordProblem(stats, entry.reason);
      continue;
    }
    stats.parsed += 1;
    entries.push({ time: entry.time, fields: entry.fields, line: stats.lines });
  }
  yield entries;
}

function parseLine(text: string, format: LogFormat, options: ReadLogOptions, times: TimeCache): LogEntry | LineProblem {
  if (format === 'jsonl') return parseJsonLine(text, options.jsonFields);
  return parseClfLine(text, format === 'combined', times);
}

function recordProblem(stats: LogStats, reason: string): void {
  stats.malformed += 1;
  if (stats.problems.length < KEPT_PROBLEMS) stats.problems.push({ line: stats.lines, reason });
}
