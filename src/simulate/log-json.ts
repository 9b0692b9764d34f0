/**
 * JSON-lines access logs: one object per line. Which member holds each field is configurable
 * (`--field ip=remote_addr`, dotted paths for nested members: `--field ip=client.address`); the
 * object's request headers are fields `header.NAME` (lower-case names).
 */
import { InvalidOptionError } from '../errors.js';
import { LineProblem } from './log-clf.js';
import type { LogEntry } from './types.js';

/** Fields every JSON log gives by default, and the member each is read from. */
export const JSON_DEFAULT_FIELDS: Readonly<Record<string, string>> = {
  time: 'time',
  ip: 'ip',
  method: 'method',
  path: 'path',
  status: 'status',
  user: 'user',
  headers: 'headers',
};
/** Field names derived from `path`: the part after `?`, and the whole target. */
const DERIVED = ['query', 'url'];
const FIELD_NAME = /^[a-z_][a-z0-9_]*$/;
/** Below this a numeric time is in seconds, above in milliseconds (1e11 s is the year 5138; 1e11 ms is 1973). */
const SECONDS_BELOW = 1e11;

/** Where each field of a JSON line is read from. */
export interface JsonFieldMap {
  /** field name → member path (split on dots). */
  readonly paths: ReadonlyMap<string, readonly string[]>;
}

/** The field map from `--field NAME=PATH` overrides (NAME is a field name, PATH a dotted member path). */
export function jsonFieldMap(overrides: readonly string[] = []): JsonFieldMap {
  const paths = new Map<string, readonly string[]>(Object.entries(JSON_DEFAULT_FIELDS).map(([name, path]) => [name, path.split('.')]));
  for (const text of overrides) {
    const match = /^([^=]+)=(.+)$/.exec(text);
    if (match === null || !FIELD_NAME.test(match[1]!) || DERIVED.includes(match[1]!) || match[2]!.split('.').some((part) => part === '')) {
      throw new InvalidOptionError(`simulate: --field must be NAME=MEMBER (NAME in a-z0-9_, not query or url; MEMBER a dotted path such as client.ip), got ${JSON.stringify(text)}`);
    }
    paths.set(match[1]!, match[2]!.split('.'));
  }
  return { paths };
}

/** The field names a JSON log with this map gives (`header.NAME` aside). */
export function jsonFieldNames(map: JsonFieldMap): string[] {
  return [...[...map.paths.keys()].filter((name) => name !== 'time' && name !== 'headers'), ...DERIVED];
}

/** Parses one JSON line; a {@link LineProblem} when it is not an object with a valid time. */
export function parseJsonLine(text: string, map: JsonFieldMap): LogEntry | LineProblem {
  let object: unknown;
  try {
    object = JSON.parse(text);
  } catch (error) {
    return new LineProblem(`not JSON: ${(error as Error).message}`);
  }
  if (typeof object !== 'object' || object === null || Array.isArray(object)) return new LineProblem('not a JSON object');
  const time = parseJsonTime(member(object, map.paths.get('time')!));
  if (typeof time === 'string') return new LineProblem(time);
  const fields: Record<string, string | undefined> = {};
  for (const [name, path] of map.paths) {
    if (name === 'time' || name === 'headers') continue;
    fields[name] = scalar(member(object, path));
  }
  const path = fields.path;
  if (path !== undefined) {
    fields.url = path;
    const queryAt = path.indexOf('?');
    if (queryAt !== -1) {
      fields.path = path.slice(0, queryAt);
      fields.query = path.slice(queryAt + 1);
    }
  }
  const headers = member(object, map.paths.get('headers')!);
  if (typeof headers === 'object' && headers !== null) {
    for (const [name, value] of Object.entries(headers)) fields[`header.${name.toLowerCase()}`] = scalar(Array.isArray(value) ? value[0] : value);
  }
  return { time, fields };
}

function member(object: object, path: readonly string[]): unknown {
  let value: unknown = object;
  for (const part of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/** An ISO 8601 string, or epoch seconds / ms (number or digits) → epoch ms; a string says what is wrong. */
export function parseJsonTime(value: unknown): number | string {
  if (typeof value === 'string' && /^\d+(\.\d+)?$/.test(value)) value = Number(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) return `time ${value} is not an epoch time`;
    return Math.floor(value < SECONDS_BELOW ? value * 1000 : value);
  }
  if (typeof value === 'string') {
    const time = Date.parse(value);
    return Number.isNaN(time) ? `time ${JSON.stringify(value)} is not an ISO 8601 time or epoch seconds / ms` : time;
  }
  return value === undefined ? 'no time member (name it with --field time=MEMBER)' : `time must be an ISO 8601 string or epoch seconds / ms, got ${typeof value}`;
}
