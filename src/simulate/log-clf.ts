/**
 * Common Log Format and Combined Log Format lines (Apache's and nginx's default access logs):
 * `ip ident user [10/Oct/2000:13:55:36 -0700] "GET /a?b HTTP/1.0" 200 2326 "referer" "agent"`.
 * A `-` means the field is absent.
 */
import type { LogEntry } from './types.js';

/** Fields a CLF line gives, by name (what `--descriptor key=FIELD` may name). */
export const CLF_FIELDS: readonly string[] = ['ip', 'ident', 'user', 'method', 'path', 'query', 'url', 'protocol', 'status', 'bytes'];
/** Fields a Combined line gives: CLF's, plus the referer and the user agent. */
export const COMBINED_FIELDS: readonly string[] = [...CLF_FIELDS, 'referer', 'user_agent'];

// A quoted field with backslash escapes, written as an unrolled loop (no alternation per character: fast).
const QUOTED = '"([^"\\\\]*(?:\\\\.[^"\\\\]*)*)"';
const CLF_LINE = new RegExp(`^(\\S+) (\\S+) (\\S+) \\[([^\\]]+)\\] ${QUOTED} (\\d{3}|-) (\\d+|-)(?: ${QUOTED} ${QUOTED})?\\s*$`);
const MONTHS: Readonly<Record<string, number>> = { Jan: 0, Feb: 1, Mar: 2, Apr: 3, May: 4, Jun: 5, Jul: 6, Aug: 7, Sep: 8, Oct: 9, Nov: 10, Dec: 11 };
const CLF_TIME = /^(\d{2})\/([A-Z][a-z]{2})\/(\d{4}):(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))? ([+-])(\d{2})(\d{2})$/;

/** A line is not what its format says; `reason` says what is wrong. */
export class LineProblem {
  constructor(readonly reason: string) {}
}

/**
 * Parses one CLF (or, with `combined`, Combined) line. `combined: undefined` takes either.
 * Returns a {@link LineProblem} instead of throwing: bad lines are counted, not fatal.
 */
export function parseClfLine(text: string, combined: boolean | undefined, times: TimeCache): LogEntry | LineProblem {
  const match = CLF_LINE.exec(text);
  if (match === null) return new LineProblem('not a Common/Combined Log Format line (ip ident user [time] "request" status bytes)');
  const hasAgent = match[8] !== undefined;
  if (combined === true && !hasAgent) return new LineProblem('a Common Log Format line in a Combined log: the "referer" "user agent" fields are missing');
  if (combined === false && hasAgent) return new LineProblem('a Combined Log Format line in a Common log (use --format combined)');
  const time = times.parse(match[4]!);
  if (time === undefined) return new LineProblem(`time [${match[4]}] is not dd/Mon/yyyy:hh:mm:ss ±hhmm`);
  const [method, url, protocol] = match[5]!.split(' ');
  const queryAt = url === undefined ? -1 : url.indexOf('?');
  // One literal with every field (absent ones undefined): every entry has the same shape.
  const fields: Record<string, string | undefined> = {
    ip: present(match[1]),
    ident: present(match[2]),
    user: present(match[3]),
    method: present(method),
    url: present(url),
    path: queryAt === -1 ? present(url) : url!.slice(0, queryAt),
    query: queryAt === -1 ? undefined : url!.slice(queryAt + 1),
    protocol: present(protocol),
    status: present(match[6]),
    bytes: present(match[7]),
    referer: hasAgent ? present(unescape(match[8]!)) : undefined,
    user_agent: hasAgent ? present(unescape(match[9]!)) : undefined,
  };
  return { time, fields };
}

/** Whether a line looks like a Combined line (for auto-detection from the first line). */
export function isCombinedLine(text: string): boolean {
  const match = CLF_LINE.exec(text);
  return match !== null && match[8] !== undefined;
}

function present(value: string | undefined): string | undefined {
  return value === undefined || value === '-' || value === '' ? undefined : value;
}

function unescape(value: string): string {
  return value.includes('\\') ? value.replace(/\\(.)/g, '$1') : value;
}

/**
 * CLF times, parsed once per distinct string: a busy log repeats the same second many times, so
 * the last one is remembered.
 */
export class TimeCache {
  private lastText = '';
  private lastTime: number | undefined;

  parse(text: string): number | undefined {
    if (text === this.lastText) return this.lastTime;
    this.lastText = text;
    this.lastTime = parseClfTime(text);
    return this.lastTime;
  }
}

/** `10/Oct/2000:13:55:36 -0700` (optionally `:36.123`) → epoch ms; undefined when malformed. */
export function parseClfTime(text: string): number | undefined {
  const match = CLF_TIME.exec(text);
  if (match === null) return undefined;
  const month = MONTHS[match[2]!];
  if (month === undefined) return undefined;
  const [day, year, hour, minute, second] = [match[1], match[3], match[4], match[5], match[6]].map(Number) as [number, number, number, number, number];
  if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return undefined;
  const ms = match[7] === undefined ? 0 : Number(match[7].padEnd(3, '0'));
  const offsetMinutes = (Number(match[9]) * 60 + Number(match[10])) * (match[8] === '-' ? -1 : 1);
  return Date.UTC(year, month, day, hour, minute, second, ms) - offsetMinutes * 60_000;
}
