/**
 * `tollgate simulate`: reads the flags, the rules, the mapping and the log, runs `simulate()` and
 * renders its report (a table, `--json`, `--html FILE`). Exit 0 when the log was replayed (with a
 * warning on stderr for malformed lines), 1 when no line could be read or a `--strict` log has a
 * bad line, 2 on bad flags, rules or mapping (the message says what to fix).
 */
import { closeSync, existsSync, openSync, readSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { InvalidLogError, InvalidOptionError, RulesError, TollgateError } from '../errors.js';
import { checkWholeNumberText } from '../options.js';
import { loadDomainConfigs } from '../rules/files.js';
import { jsonFieldMap } from './log-json.js';
import { LOG_FORMATS, detectFormat, fieldsOf, readAccessLog, type LogFormat } from './log-read.js';
import { checkMapping, mappingFromFlags, readMappingFile } from './mapping.js';
import { renderHtml } from './render-html.js';
import { renderText } from './render-text.js';
import { REPORT_BOUNDS, simulate } from './simulate.js';
import type { AlgorithmName } from '../policy.js';

/** The command's flags, for `parseArgs`. */
export const SIMULATE_FLAGS = {
  rules: { type: 'string' },
  log: { type: 'string' },
  format: { type: 'string' },
  field: { type: 'string', multiple: true },
  domain: { type: 'string', multiple: true },
  descriptor: { type: 'string', multiple: true },
  map: { type: 'string' },
  algorithm: { type: 'string' },
  'compare-to': { type: 'string' },
  top: { type: 'string' },
  json: { type: 'boolean' },
  html: { type: 'string' },
  strict: { type: 'boolean' },
} as const;

/** The flags as `parseArgs` gives them. */
export interface SimulateFlags {
  readonly rules?: string;
  readonly log?: string;
  readonly format?: string;
  readonly field?: readonly string[];
  readonly domain?: readonly string[];
  readonly descriptor?: readonly string[];
  readonly map?: string;
  readonly algorithm?: string;
  readonly 'compare-to'?: string;
  readonly top?: string;
  readonly json?: boolean;
  readonly html?: string;
  readonly strict?: boolean;
}

/** Where the command writes, and whether each is a terminal. */
export interface CommandOutput {
  readonly stdout: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly stderr: { write(text: string): unknown; readonly isTTY?: boolean };
}

/**
 * The command from its arguments: flags parsed and checked, a bad one answered on stderr with
 * `usage` and exit 2.
 */
export async function runSimulateCommand(args: readonly string[], output: CommandOutput, usage: string): Promise<number> {
  try {
    const { values } = parseArgs({ args: [...args], options: SIMULATE_FLAGS, allowPositionals: false });
    return await runSimulate(values, output);
  } catch (error) {
    if (error instanceof TollgateError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) {
      const message = (error as Error).message;
      output.stderr.write(`tollgate: ${message.startsWith('simulate:') ? message : `simulate: ${message}`}\n${usage}`);
      return 2;
    }
    throw error;
  }
}

/** Runs the command; resolves to its exit code. Throws {@link InvalidOptionError} on bad flags (exit 2). */
export async function runSimulate(flags: SimulateFlags, output: CommandOutput): Promise<number> {
  const setup = await prepare(flags);
  const progress = output.stderr.isTTY === true ? progressBar(output.stderr) : undefined;
  const log = readAccessLog(flags.log!, { format: setup.format, jsonFields: setup.jsonFields, strict: flags.strict === true, ...(progress === undefined ? {} : { onProgress: progress }) });
  let report;
  try {
    report = await simulate({ rules: setup.rules, entries: log.entries, mapping: setup.mapping, algorithms: setup.algorithms, ...(setup.compareTo === undefined ? {} : { compareTo: setup.compareTo }), topKeys: setup.top });
  } catch (error) {
    if (progress !== undefined) output.stderr.write('\r\x1b[K');
    if (error instanceof InvalidLogError) {
      output.stderr.write(`tollgate simulate: ${error.message} (--strict stops at the first malformed line)\n`);
      return 1;
    }
    throw error;
  }
  if (progress !== undefined) output.stderr.write('\r\x1b[K');
  const stats = log.stats;
  if (stats.malformed > 0) {
    const first = stats.problems.map((problem) => `line ${problem.line}: ${problem.reason}`).join('\n  ');
    output.stderr.write(`tollgate simulate: warning: ${stats.malformed} of ${stats.lines} lines are not ${stats.format} lines and were skipped; the first:\n  ${first}\n`);
  }
  if (stats.parsed === 0 && stats.malformed > 0) {
    output.stderr.write(`tollgate simulate: no line of ${stats.file} could be read as a ${stats.format} log (give --format, or --field for JSON members)\n`);
    return 1;
  }
  if (flags.html !== undefined) {
    try {
      writeFileSync(flags.html, renderHtml(report, stats));
    } catch (error) {
      output.stderr.write(`tollgate simulate: cannot write the HTML report to ${flags.html}: ${(error as Error).message}\n`);
      return 1;
    }
  }
  if (flags.json === true) output.stdout.write(`${JSON.stringify({ log: stats, ...report }, null, 2)}\n`);
  else output.stdout.write(renderText(report, stats, output.stdout.isTTY === true && process.env.NO_COLOR === undefined));
  return 0;
}

/** Checks every flag and loads what they name, before any line is read. */
async function prepare(flags: SimulateFlags) {
  if (flags.rules === undefined) throw new InvalidOptionError('simulate: --rules DIR|FILE is required: the rules to replay the log against (as serve --config takes)');
  if (flags.log === undefined) throw new InvalidOptionError('simulate: --log FILE is required: the access log to replay (Common/Combined Log Format or JSON lines)');
  if (flags.format !== undefined && !(LOG_FORMATS as readonly string[]).includes(flags.format)) {
    throw new InvalidOptionError(`simulate: --format must be one of ${LOG_FORMATS.join(', ')}, got ${JSON.stringify(flags.format)}`);
  }
  if (flags.map !== undefined && (flags.domain !== undefined || flags.descriptor !== undefined)) {
    throw new InvalidOptionError('simulate: give either --map FILE or --domain / --descriptor, not both');
  }
  if (flags.html !== undefined && !(existsSync(dirname(flags.html)) && statSync(dirname(flags.html)).isDirectory())) {
    throw new InvalidOptionError(`simulate: --html ${JSON.stringify(flags.html)}: the directory ${dirname(flags.html)} does not exist; give a file in an existing directory`);
  }
  const top = checkWholeNumberText(flags.top, { ...REPORT_BOUNDS.topKeys, name: 'simulate: --top' });
  const jsonFields = jsonFieldMap(flags.field);
  const format = (flags.format as LogFormat | undefined) ?? formatOfFile(flags.log);
  if (flags.field !== undefined && format !== 'jsonl') throw new InvalidOptionError(`simulate: --field applies to JSON-lines logs only; this log is ${format}`);
  let rules;
  try {
    rules = await loadDomainConfigs(flags.rules);
  } catch (error) {
    if (error instanceof RulesError) throw new InvalidOptionError(`simulate: --rules: ${error.message}`);
    throw error;
  }
  const domains = rules.map((domain) => domain.domain);
  const mapping = flags.map !== undefined ? readMappingFile(flags.map) : mappingFromFlags(flags.domain ?? domains, flags.descriptor ?? []);
  checkMapping(mapping, fieldsOf(format, jsonFields), format === 'jsonl', domains, format);
  const algorithms = flags.algorithm === undefined ? [] : (flags.algorithm.split(',') as AlgorithmName[]);
  const compareTo = flags['compare-to'] as AlgorithmName | undefined;
  return { rules, mapping, format, jsonFields, algorithms, compareTo, top };
}

/** The format of a log from its first non-blank line (read from the first 64 KiB). */
function formatOfFile(file: string): LogFormat {
  const buffer = Buffer.alloc(65_536);
  let length: number;
  try {
    const fd = openSync(file, 'r');
    try {
      length = readSync(fd, buffer, 0, buffer.length, 0);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    throw new InvalidOptionError(`simulate: --log ${JSON.stringify(file)} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); give an access log file`);
  }
  const first = buffer.subarray(0, length).toString('utf8').split('\n').find((line) => line.trim() !== '');
  return first === undefined ? 'clf' : detectFormat(first);
}

/** A progress bar on a terminal: bytes read of the file, redrawn at most 10 times a second. */
function progressBar(stream: CommandOutput['stderr']): (bytesRead: number, size: number) => void {
  let last = 0;
  return (bytesRead, size) => {
    const now = Date.now();
    if (now - last < 100) return;
    last = now;
    const share = size === 0 ? 1 : Math.min(1, bytesRead / size);
    const filled = Math.round(share * 30);
    stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(30 - filled)}] ${(share * 100).toFixed(0).padStart(3)}%  ${megabytes(bytesRead)} / ${megabytes(size)} MB`);
  };
}

function megabytes(bytes: number): string {
  return (bytes / 1_048_576).toFixed(1);
}

