/**
 * How a log line becomes check requests. Logs are not envoy requests, so a mapping says which
 * descriptors each line makes: per request a domain, descriptors whose entries take their value
 * from a field of the line (`field: ip`) or a literal (`value: login`), and optionally `when`, the
 * field values a line must have for the request to apply. A descriptor with an absent field is
 * left out of that line's request (as envoy leaves out a descriptor whose header is absent).
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { InvalidOptionError, describeValue } from '../errors.js';
import type { CheckRequest, RateLimitDescriptor } from '../rules/check.js';
import { closestMatch } from '../rules/parse/suggest.js';
import type { LogEntry } from './types.js';

/** One entry of a mapped descriptor: the value comes from a log field, or is written literally. */
export type MappedEntry = { readonly key: string; readonly field: string } | { readonly key: string; readonly value: string };

/** One check request each log line makes. */
export interface MappedRequest {
  readonly domain: string;
  readonly descriptors: readonly { readonly entries: readonly MappedEntry[] }[];
  /** Field → value the line must have (a value ending in `*` is a prefix); absent: every line. */
  readonly when?: Readonly<Record<string, string>>;
}

/** The whole mapping: every line is turned into these requests (those that apply). */
export interface LogMapping {
  readonly requests: readonly MappedRequest[];
}

/** What `--descriptor` defaults to: the client address, as envoy's `remote_address` action. */
export const DEFAULT_DESCRIPTOR = 'remote_address=ip';

/**
 * The mapping of `--domain D` (repeatable; default every domain of the rules) and
 * `--descriptor key=FIELD` (repeatable, in order; default `remote_address=ip`): one descriptor per
 * domain.
 */
export function mappingFromFlags(domains: readonly string[], descriptors: readonly string[]): LogMapping {
  const entries = (descriptors.length > 0 ? descriptors : [DEFAULT_DESCRIPTOR]).map((text): MappedEntry => {
    const match = /^([^=]+)=(.+)$/.exec(text);
    if (match === null) throw new InvalidOptionError(`simulate: --descriptor must be KEY=FIELD (e.g. --descriptor remote_address=ip), got ${JSON.stringify(text)}`);
    return { key: match[1]!, field: match[2]! };
  });
  return { requests: domains.map((domain) => ({ domain, descriptors: [{ entries }] })) };
}

/** Reads a YAML mapping file (`requests: [{ domain, descriptors: [{ entries: [...] }], when }]`). */
export function readMappingFile(file: string): LogMapping {
  let document: unknown;
  try {
    document = parseYaml(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new InvalidOptionError(`simulate: --map ${file}: ${(error as Error).message.split('\n')[0]}`);
  }
  return parseMapping(document, file);
}

/** Checks the shape of a mapping read from YAML or JSON; `where` names its source in messages. */
export function parseMapping(document: unknown, where: string): LogMapping {
  const fail = (path: string, problem: string): never => {
    throw new InvalidOptionError(`simulate: ${where}: ${path}: ${problem}`);
  };
  const requests = objectOf(document, 'the mapping', ['requests'], fail).requests;
  if (!Array.isArray(requests) || requests.length === 0) fail('requests', `must be a non-empty list of { domain, descriptors, when? }, got ${describeValue(requests)}`);
  return {
    requests: (requests as unknown[]).map((item, i) => {
      const path = `requests[${i}]`;
      const request = objectOf(item, path, ['domain', 'descriptors', 'when'], fail);
      if (typeof request.domain !== 'string' || request.domain === '') fail(`${path}.domain`, `must be a domain of the rules, got ${describeValue(request.domain)}`);
      if (!Array.isArray(request.descriptors) || request.descriptors.length === 0) fail(`${path}.descriptors`, `must be a non-empty list of { entries: [...] }, got ${describeValue(request.descriptors)}`);
      const descriptors = (request.descriptors as unknown[]).map((descriptor, j) => ({ entries: parseEntries(descriptor, `${path}.descriptors[${j}]`, fail) }));
      const when = request.when === undefined ? undefined : parseWhen(request.when, `${path}.when`, fail);
      return { domain: request.domain as string, descriptors, ...(when === undefined ? {} : { when }) };
    }),
  };
}

type Fail = (path: string, problem: string) => never;

function objectOf(value: unknown, path: string, names: readonly string[], fail: Fail): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(path, `must be a mapping with ${names.join(', ')}, got ${describeValue(value)}`);
  const unknown = Object.keys(value).find((name) => !names.includes(name));
  if (unknown !== undefined) fail(`${path}.${unknown}`, `unknown name; ${path} has ${names.join(', ')}`);
  return value as Record<string, unknown>;
}

function parseEntries(descriptor: unknown, path: string, fail: Fail): MappedEntry[] {
  const entries = objectOf(descriptor, path, ['entries'], fail).entries;
  if (!Array.isArray(entries) || entries.length === 0) fail(`${path}.entries`, `must be a non-empty list of { key, field } or { key, value }, got ${describeValue(entries)}`);
  return (entries as unknown[]).map((item, k) => {
    const at = `${path}.entries[${k}]`;
    const entry = objectOf(item, at, ['key', 'field', 'value'], fail);
    if (typeof entry.key !== 'string' || entry.key === '') fail(`${at}.key`, `must be the descriptor key, a non-empty string, got ${describeValue(entry.key)}`);
    const key = entry.key as string;
    if ((entry.field === undefined) === (entry.value === undefined)) fail(at, 'give exactly one of field (a log field, e.g. ip) and value (a literal)');
    if (entry.field !== undefined) {
      if (typeof entry.field !== 'string' || entry.field === '') fail(`${at}.field`, `must be a log field name, got ${describeValue(entry.field)}`);
      return { key, field: entry.field as string };
    }
    if (typeof entry.value !== 'string' && typeof entry.value !== 'number') fail(`${at}.value`, `must be a string, got ${describeValue(entry.value)}`);
    return { key, value: String(entry.value) };
  });
}

function parseWhen(value: unknown, path: string, fail: Fail): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(path, `must be a mapping of field: value, got ${describeValue(value)}`);
  return Object.fromEntries(
    Object.entries(value).map(([field, wanted]) => {
      if (typeof wanted !== 'string' && typeof wanted !== 'number') fail(`${path}.${field}`, `must be a value (a trailing * matches a prefix), got ${describeValue(wanted)}`);
      return [field, String(wanted)];
    }),
  );
}

/**
 * Checks every field the mapping names against the fields the log gives (`header.NAME` is allowed
 * when `headers` is true) and every domain against the rules' domains.
 */
export function checkMapping(mapping: LogMapping, fields: readonly string[], headers: boolean, domains: readonly string[], format: string): void {
  const known = (field: string): boolean => fields.includes(field) || (headers && /^header\.[a-z0-9!#$%&'*+.^_`|~-]+$/.test(field));
  const check = (field: string, where: string): void => {
    if (known(field)) return;
    const near = closestMatch(field, fields);
    const hint = near === undefined ? '' : ` (did you mean "${near}"?)`;
    throw new InvalidOptionError(`simulate: ${where}: unknown log field ${JSON.stringify(field)}${hint}; a ${format} log has ${fields.join(', ')}${headers ? ', header.NAME' : ''}`);
  };
  for (const [i, request] of mapping.requests.entries()) {
    if (!domains.includes(request.domain)) {
      throw new InvalidOptionError(`simulate: requests[${i}].domain: the rules have no domain ${JSON.stringify(request.domain)}; they have ${domains.join(', ')}`);
    }
    for (const descriptor of request.descriptors) {
      for (const entry of descriptor.entries) if ('field' in entry) check(entry.field, `descriptor ${entry.key}=${entry.field}`);
    }
    for (const field of Object.keys(request.when ?? {})) check(field, `when ${field}`);
  }
}

/** The check requests `entry` makes at `now` (those whose `when` holds and that keep a descriptor). */
export function requestsFor(mapping: LogMapping, entry: LogEntry, now: number): CheckRequest[] {
  const requests: CheckRequest[] = [];
  for (const request of mapping.requests) {
    if (request.when !== undefined && !matches(request.when, entry)) continue;
    const descriptors: RateLimitDescriptor[] = [];
    for (const descriptor of request.descriptors) {
      const entries = [];
      for (const mapped of descriptor.entries) {
        const value = 'field' in mapped ? entry.fields[mapped.field] : mapped.value;
        if (value === undefined) break;
        entries.push({ key: mapped.key, value });
      }
      if (entries.length === descriptor.entries.length) descriptors.push({ entries });
    }
    if (descriptors.length > 0) requests.push({ domain: request.domain, descriptors, now });
  }
  return requests;
}

function matches(when: Readonly<Record<string, string>>, entry: LogEntry): boolean {
  for (const field in when) {
    const wanted = when[field]!;
    const value = entry.fields[field];
    if (value === undefined) return false;
    if (wanted.endsWith('*') ? !value.startsWith(wanted.slice(0, -1)) : value !== wanted) return false;
  }
  return true;
}
