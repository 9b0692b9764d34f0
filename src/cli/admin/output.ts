/**
 * What the commands print: plain tables for people, JSON for scripts; and the short usage error of
 * every `tollgate` command (here, the lowest room of src/cli/, so all reach it).
 */
import { closestMatch } from '../../rules/parse/suggest.js';

/** Where a command writes (the process's streams, or a test's buffers). */
export interface CommandOutput {
  stdout(text: string): void;
  stderr(text: string): void;
}

/** Rows as aligned columns under a header, one line each. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ');
  return [line(header), ...rows.map(line)].map((text) => `${text.trimEnd()}\n`).join('');
}

/** A duration in ms, short and readable: 850ms, 12.5s, 3m 20s, 2h 5m. */
export function readableMs(ms: number): string {
  if (ms < 1_000) return `${ms}ms`;
  if (ms < 60_000) return `${Number((ms / 1_000).toFixed(1))}s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1_000);
  if (minutes < 60) return seconds === 0 ? `${minutes}m` : `${minutes}m ${seconds}s`;
  return minutes % 60 === 0 ? `${minutes / 60}h` : `${Math.floor(minutes / 60)}h ${minutes % 60}m`;
}

/** The answer as JSON, one document on stdout. */
export function printJson(output: CommandOutput, value: unknown): void {
  output.stdout(`${JSON.stringify(value, null, 2)}\n`);
}

/**
 * A `node:util` parseArgs error as a short usage error: an unknown flag with the closest known one
 * ("did you mean --config?"), other errors by their first sentence; then where the help is.
 */
export function flagErrorText(command: string | undefined, error: Error, flags: readonly string[]): string {
  const unknown = /^Unknown option '(-{1,2})([^']*)'/.exec(error.message);
  let message: string;
  if (unknown !== null) {
    const suggestion = closestMatch(unknown[2]!, flags);
    message = `unknown flag ${unknown[1]}${unknown[2]}${suggestion === undefined ? '' : ` (did you mean --${suggestion}?)`}`;
  } else {
    message = error.message.split(/\.\s/)[0]!.replace(/\.$/, '');
  }
  const name = command === undefined ? 'tollgate' : `tollgate ${command}`;
  return `${name}: ${message}\nsee ${name} --help\n`;
}
