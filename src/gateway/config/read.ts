/**
 * The gateway's configuration file: YAML text in, a validated {@link GatewayConfig} out, or every
 * problem as a `RulesError` at `file:line:col: path: message` (one pass reports all of them), read
 * with the rules loader's YAML layer and field readers, so both files fail the same way.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, isScalar, isSeq, type YAMLMap } from 'yaml';
import { GatewayConfigError, type RulesError } from '../../errors.js';
import { clientIp } from '../../http/identity/index.js';
import { HEADER_STYLES, type HeaderStyle } from '../../http/report.js';
import { DocumentReader, readChoice, readFlag, readText, readWholeNumber, reportMissing, type Entry, type FieldSet } from '../../rules/parse/fields.js';
import { closestMatch } from '../../rules/parse/suggest.js';
import { Problems, StopReading, parseYamlDocuments, sizeProblem, RULES_LIMITS } from '../../rules/parse/yaml.js';
import { readRateLimits } from './actions.js';
import { readMappings, readWords } from './lists.js';
import { readHeaderMatchers, readRegex } from './matchers.js';
import { readDeferBlock, checkDeferRoutes } from '../defer/config.js';
import { declaredNames, readUpstreams } from './upstreams.js';
import { readDuration } from './values.js';
import { checkSharedRooms, readWaitingRoom } from '../waiting-room/config.js';
import { EDGE_PATH_SETTINGS, ESCAPED_SLASH_ACTIONS, type PathSettings } from '../paths.js';
import type { GatewayConfig, OnLimit, RouteConfig, RouteMatch } from './types.js';

const TOP_FIELDS: FieldSet = {
  what: 'the gateway configuration',
  names: [
    'listen', 'source_cluster', 'upstreams', 'rules', 'routes', 'domain', 'trust_proxy', 'headers', 'timeout', 'connect_timeout',
    'normalize_path', 'merge_slashes', 'path_with_escaped_slashes_action', 'ipv6_subnet',
  ],
  misplaced: { match: 'belongs in a route (an item of routes)', rate_limits: 'belongs in a route (an item of routes)', upstream: 'belongs in a route; the list of upstreams is upstreams' },
};

const ROUTE_FIELDS: FieldSet = {
  what: 'a route',
  names: ['match', 'upstream', 'domain', 'rate_limits', 'timeout', 'on_limit', 'shaping', 'defer', 'waiting_room'],
  misplaced: {
    ...Object.fromEntries(['prefix', 'path', 'safe_regex', 'methods', 'method', 'host', 'headers'].map((name) => [name, `belongs in match (match: { prefix: /api, ${name === 'prefix' ? 'methods: [GET]' : `${name}: ...`} })`])),
    actions: 'belongs in an item of rate_limits',
    max_delay: 'belongs in shaping (shaping: { max_delay: 2s })',
    ...Object.fromEntries(['queue', 'max_length', 'max_body', 'max_attempts', 'result_ttl', 'reclaim_after'].map((name) => [name, `belongs in defer (defer: { ${name}: ... })`])),
    ...Object.fromEntries(['active_users', 'session_ttl', 'secret_env'].map((name) => [name, `belongs in waiting_room (waiting_room: { ${name}: ... })`])),
  },
};

const MATCH_FIELDS: FieldSet = { what: 'a match', names: ['prefix', 'path', 'safe_regex', 'case_sensitive', 'methods', 'method', 'host', 'headers'], misplaced: {} };
const SHAPING_FIELDS: FieldSet = { what: 'shaping', names: ['max_delay'], misplaced: {} };

/** The answers to a throttled request a route may choose. */
const ON_LIMIT = ['reject', 'shape', 'defer'] as const;
/** envoy's route timeout default. */
const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const METHOD = /^[A-Z]+$/;

/** Reads and validates the configuration file at `path`. @throws {GatewayConfigError} listing every problem. */
export function loadGatewayConfig(path: string): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new GatewayConfigError(`${path}: the gateway configuration cannot be read: ${(error as Error).message}`, []);
  }
  return parseGatewayConfig(text, path, dirname(resolve(path)));
}

/** Parses configuration text; `source` names it in messages, `base` is where relative paths start. */
export function parseGatewayConfig(text: string, source: string, base: string): GatewayConfig {
  const lineCounter = new LineCounter();
  const problems = new Problems(source, lineCounter);
  let config: GatewayConfig | undefined;
  try {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > RULES_LIMITS.maxBytes) problems.fatal(0, '', sizeProblem(bytes));
    const documents = parseYamlDocuments(text, problems, lineCounter).filter((yaml) => yaml.document.contents !== null);
    if (documents.length > 1) problems.add(documents[1]!.document.range[0], '', 'the gateway configuration is one YAML document; remove the second one (---)');
    const first = documents[0];
    if (first === undefined && problems.errors.length === 0) problems.add(0, '', 'the file is empty: give at least upstreams and routes (docs/gateway.md)');
    if (first !== undefined) config = readTop(new DocumentReader(problems, first), first.document.contents as NonNullable<Entry['value']>, base);
  } catch (error) {
    if (!(error instanceof StopReading)) throw error;
  }
  const errors: RulesError[] = [...problems.errors].sort((a, b) => a.line - b.line || a.column - b.column);
  if (errors.length > 0 || config === undefined) throw new GatewayConfigError(errors.map((error) => error.message).join('\n'), errors);
  return config;
}

function readTop(reader: DocumentReader, node: NonNullable<Entry['value']>, base: string): GatewayConfig | undefined {
  const map = reader.mapping(node, '', 'a mapping with upstreams and routes');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, '', TOP_FIELDS);
  const upstreams = readUpstreams(reader, fields.get('upstreams'), base);
  const upstreamNames = declaredNames(fields.get('upstreams'));
  if (!fields.has('upstreams')) reportMissing(reader, map, '', 'upstreams', 'name the servers to forward to, e.g. upstreams: { api: "http://127.0.0.1:9000" }');
  if (!fields.has('routes')) reportMissing(reader, map, '', 'routes', 'list the routes, e.g. routes: [{ match: { prefix: / }, upstream: api }]');
  const rules = readText(reader, fields.get('rules'));
  const defaults: RouteDefaults = {
    domain: readText(reader, fields.get('domain')),
    timeoutMs: readDuration(reader, fields.get('timeout')) ?? DEFAULT_TIMEOUT_MS,
    base,
  };
  const routes = readRoutes(reader, fields.get('routes'), upstreamNames, defaults);
  return {
    listen: readListen(reader, fields.get('listen')),
    sourceCluster: readText(reader, fields.get('source_cluster')) ?? 'tollgate',
    upstreams,
    rules: rules === undefined ? undefined : resolve(base, rules),
    routes,
    trustProxy: readTrustProxy(reader, fields.get('trust_proxy')),
    // The middleware's bounds (clientIp's ipv6Subnet) and default.
    ipv6Subnet: readWholeNumber(reader, fields.get('ipv6_subnet'), 32, 64) ?? 56,
    headers: (readChoice(reader, fields.get('headers'), HEADER_STYLES) ?? 'legacy') as HeaderStyle,
    connectTimeoutMs: readDuration(reader, fields.get('connect_timeout')) ?? DEFAULT_CONNECT_TIMEOUT_MS,
    paths: readPathSettings(reader, fields),
  };
}

/** The path settings, envoy's edge recommendations by default (`EDGE_PATH_SETTINGS`); envoy's upper-case enum names are taken too. */
function readPathSettings(reader: DocumentReader, fields: ReadonlyMap<string, Entry>): PathSettings {
  const escaped = readChoice(reader, fields.get('path_with_escaped_slashes_action'), ESCAPED_SLASH_ACTIONS, (text) => text.toLowerCase());
  return {
    normalize: readFlag(reader, fields.get('normalize_path')) ?? EDGE_PATH_SETTINGS.normalize,
    mergeSlashes: readFlag(reader, fields.get('merge_slashes')) ?? EDGE_PATH_SETTINGS.mergeSlashes,
    escapedSlashes: escaped ?? EDGE_PATH_SETTINGS.escapedSlashes,
  };
}

/** `listen: 8888` or `listen: "127.0.0.1:8888"`. */
function readListen(reader: DocumentReader, entry: Entry | undefined): GatewayConfig['listen'] {
  if (entry?.value === undefined) return undefined;
  const text = readText(reader, entry) ?? '';
  const match = /^(?:(.+):)?(\d{1,5})$/.exec(text);
  if (match === null || Number(match[2]) > 65_535) {
    reader.report(entry.value, entry.path, `listen must be a port (8888) or host:port ("127.0.0.1:8888"), got ${JSON.stringify(text)}`);
    return undefined;
  }
  return { ...(match[1] !== undefined ? { host: match[1].replace(/^\[|\]$/g, '') } : {}), port: Number(match[2]) };
}

/** What routes inherit from the top of the file, and where relative paths start. */
interface RouteDefaults {
  readonly domain: string | undefined;
  readonly timeoutMs: number;
  readonly base: string;
}

function readRoutes(reader: DocumentReader, entry: Entry | undefined, upstreams: ReadonlySet<string>, defaults: RouteDefaults): RouteConfig[] {
  const expected = { list: 'a list of routes (- match: { prefix: / }, upstream: api)', item: 'a route like { match: { prefix: / }, upstream: api }' };
  const read: { route: RouteConfig; map: YAMLMap; path: string }[] = [];
  const routes = readMappings(reader, entry, expected, (map, path) => {
    const route = readRoute(reader, map, path, upstreams, defaults);
    if (route !== undefined) read.push({ route, map, path });
    return route;
  });
  checkDeferRoutes(reader, read);
  checkSharedRooms(reader, read);
  return routes;
}

function readRoute(reader: DocumentReader, map: YAMLMap, path: string, upstreams: ReadonlySet<string>, defaults: RouteDefaults): RouteConfig | undefined {
  const fields = reader.entries(map, path, ROUTE_FIELDS);
  const matchEntry = fields.get('match');
  if (matchEntry === undefined) reportMissing(reader, map, path, 'match', 'say which requests it takes, e.g. match: { prefix: / }');
  const match = matchEntry === undefined ? undefined : readMatch(reader, matchEntry);
  const upstream = readUpstreamName(reader, fields.get('upstream'), upstreams);
  if (!fields.has('upstream')) reportMissing(reader, map, path, 'upstream', `name the upstream to forward to (one of ${[...upstreams.keys()].join(', ') || 'upstreams'})`);
  const rateLimits = readRateLimits(reader, fields.get('rate_limits'));
  const domain = readText(reader, fields.get('domain')) ?? defaults.domain;
  if (rateLimits.length > 0 && domain === undefined) reportMissing(reader, map, path, 'domain', 'name the rules domain its descriptors are checked in, e.g. domain: rl (or a top-level domain)');
  const timeoutMs = readDuration(reader, fields.get('timeout')) ?? defaults.timeoutMs;
  const shaping = readShaping(reader, fields.get('shaping'));
  const onLimit = readOnLimit(reader, fields.get('on_limit'), shaping, fields.has('shaping'), map, path);
  const deferEntry = fields.get('defer');
  if (deferEntry !== undefined && onLimit !== 'defer' && onLimit !== undefined) reader.report(deferEntry.key, deferEntry.path, 'defer settings only apply with on_limit: defer; add it, or remove defer');
  const defer = onLimit === 'defer' ? readDeferBlock(reader, deferEntry, path, domain) : undefined;
  const roomEntry = fields.get('waiting_room');
  const waitingRoom = readWaitingRoom(reader, roomEntry, path, defaults.base, process.env);
  if (match === undefined || upstream === undefined || onLimit === undefined || (onLimit === 'defer' && defer === undefined) || (roomEntry !== undefined && waitingRoom === undefined)) return undefined;
  const { line } = reader.problems.locate(map.range?.[0] ?? 0);
  const extras = { ...(defer !== undefined ? { defer } : {}), ...(waitingRoom !== undefined ? { waitingRoom } : {}) };
  return { match, upstream, domain, rateLimits, timeoutMs, onLimit, maxDelayMs: shaping, ...extras, where: `${reader.problems.source}:${line}` };
}

function readUpstreamName(reader: DocumentReader, entry: Entry | undefined, upstreams: ReadonlySet<string>): string | undefined {
  const name = readText(reader, entry);
  if (name === undefined || entry?.value === undefined || upstreams.has(name)) return name;
  const suggestion = closestMatch(name, [...upstreams.keys()]);
  const known = upstreams.size === 0 ? 'no upstreams are defined' : `the upstreams are ${[...upstreams.keys()].join(', ')}`;
  reader.report(entry.value, entry.path, `unknown upstream ${JSON.stringify(name)}${suggestion === undefined ? '' : `; did you mean ${JSON.stringify(suggestion)}?`} (${known})`);
  return undefined;
}

/** `on_limit` (default reject; shape when `shaping` is given). A `shaping` given but refused was reported already: it is not also missing. */
function readOnLimit(reader: DocumentReader, entry: Entry | undefined, maxDelayMs: number | undefined, shapingGiven: boolean, map: YAMLMap, path: string): OnLimit | undefined {
  const chosen = readChoice(reader, entry, ON_LIMIT);
  if (entry !== undefined && chosen === undefined) return undefined;
  if (chosen === 'defer' && maxDelayMs !== undefined) {
    reader.report(entry!.value, entry!.path, 'on_limit: defer queues throttled requests, so shaping has no effect: remove shaping, or write on_limit: shape');
    return undefined;
  }
  const onLimit = chosen ?? (maxDelayMs !== undefined ? 'shape' : 'reject');
  if (onLimit === 'shape' && maxDelayMs === undefined) {
    if (!shapingGiven) reportMissing(reader, map, path, 'shaping', 'on_limit: shape holds requests up to a longest wait: give shaping: { max_delay: 2s }');
    return undefined;
  }
  if (onLimit === 'reject' && maxDelayMs !== undefined) {
    reader.report(entry!.value, entry!.path, 'on_limit: reject refuses at once, so shaping has no effect: remove shaping, or write on_limit: shape');
    return undefined;
  }
  return onLimit;
}

/** `shaping: { max_delay: 2s }`: the longest wait, in ms. */
function readShaping(reader: DocumentReader, entry: Entry | undefined): number | undefined {
  if (entry?.value === undefined) return undefined;
  const map = reader.mapping(entry.value, entry.path, 'a mapping like { max_delay: 2s }');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, SHAPING_FIELDS);
  if (!fields.has('max_delay')) reportMissing(reader, map, entry.path, 'max_delay', 'give the longest a request may wait, e.g. max_delay: 2s');
  return readDuration(reader, fields.get('max_delay'));
}

function readMatch(reader: DocumentReader, entry: Entry): RouteMatch | undefined {
  if (entry.value === undefined) return undefined;
  const map = reader.mapping(entry.value, entry.path, 'a match like { prefix: /api }');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, MATCH_FIELDS);
  const given = ['prefix', 'path', 'safe_regex'].filter((name) => fields.has(name));
  if (given.length !== 1) {
    reader.report(map, entry.path, `a match takes exactly one of prefix, path, safe_regex; got ${given.length === 0 ? 'none' : given.join(' and ')}`);
    return undefined;
  }
  const caseSensitive = readFlag(reader, fields.get('case_sensitive')) ?? true;
  const inCase = (text: string | undefined): string | undefined => (caseSensitive ? text : text?.toLowerCase());
  const prefix = inCase(readPathText(reader, fields.get('prefix')));
  const path = inCase(readPathText(reader, fields.get('path')));
  const regexEntry = fields.get('safe_regex');
  const regex = regexEntry === undefined ? undefined : readRegex(reader, regexEntry);
  const methods = readMethods(reader, fields.get('methods') ?? fields.get('method'));
  const hosts = readHosts(reader, fields.get('host'));
  const headers = readHeaderMatchers(reader, fields.get('headers'));
  return {
    ...(prefix !== undefined ? { prefix } : {}),
    ...(path !== undefined ? { path } : {}),
    caseSensitive,
    ...(regex !== undefined ? { regex } : {}),
    ...(methods !== undefined ? { methods } : {}),
    ...(hosts !== undefined ? { hosts } : {}),
    headers,
  };
}

function readPathText(reader: DocumentReader, entry: Entry | undefined): string | undefined {
  const text = readText(reader, entry);
  if (text === undefined || text.startsWith('/')) return text;
  reader.report(entry!.value, entry!.path, `${entry!.name} must start with /, got ${JSON.stringify(text)}`);
  return undefined;
}

/** `method: GET` or `methods: [GET, POST]`, upper-case. */
function readMethods(reader: DocumentReader, entry: Entry | undefined): string[] | undefined {
  return readWords(reader, entry, { list: 'a list of methods', valid: METHOD, problem: (method) => `${JSON.stringify(method)} is not a method: write it in capitals, like GET or POST` });
}

/** `host: api.example.com`, `*.example.com`, or a list of them. */
function readHosts(reader: DocumentReader, entry: Entry | undefined): string[] | undefined {
  return readWords(reader, entry, {
    list: 'a list of host names',
    valid: /^(?:\*|(?:\*\.)?[a-z0-9.-]+)$/,
    // A fully qualified name's trailing dot names the same host (a request's is dropped too).
    normalize: (host) => host.toLowerCase().replace(/\.$/, ''),
    problem: (host) => `${JSON.stringify(host)} is not a host name: write api.example.com, *.example.com or *`,
  });
}

/** A trust_proxy value, as the middleware takes it: false, a hop count, or CIDRs / names. */
function readTrustProxy(reader: DocumentReader, entry: Entry | undefined): GatewayConfig['trustProxy'] {
  if (entry?.value === undefined) return false;
  const value = entry.value;
  if (isScalar(value) && value.value === false) return false;
  if (isScalar(value) && typeof value.value === 'number') return readWholeNumber(reader, entry, 1, 64) ?? false;
  const nodes = isSeq(value) ? (reader.list(value, entry.path, 'a list of CIDRs') ?? []).map((item) => ({ ...entry, value: item.node, path: item.path })) : [entry];
  const ranges = nodes.map((item) => readText(reader, item)).filter((text): text is string => text !== undefined);
  const trusted = ranges.flatMap((text) => text.split(',').map((part) => part.trim()));
  try {
    clientIp({ trustProxy: trusted });
  } catch (error) {
    reader.report(value, entry.path, (error as Error).message.replace(/^clientIp: trustProxy/, 'trust_proxy'));
    return false;
  }
  return trusted;
}
