/**
 * Reading a route's `rate_limits`: each item is `{ actions: [...], hits_addend?, apply_on_stream_done? }`
 * and each action one of envoy's `config.route.v3.RateLimit.Action` types, written as envoy writes
 * them (`- request_headers: { header_name: foo, descriptor_key: foo }`).
 */
import { isMap, type YAMLMap } from 'yaml';
import { joinPath, readFlag, readText, readWholeNumber, reportMissing, type DocumentReader, type Entry, type FieldSet } from '../../rules/parse/fields.js';
import { MAX_DESCRIPTORS, MAX_ENTRIES } from '../../rules/check.js';
import { readMappings } from './lists.js';
import { readHeaderMatchers, readHeaderName } from './matchers.js';
import type { RateLimitAction, RateLimitConfig } from './types.js';

/** The action types the gateway takes; envoy's others are refused by name. */
export const ACTION_TYPES = ['source_cluster', 'destination_cluster', 'request_headers', 'remote_address', 'masked_remote_address', 'generic_key', 'header_value_match'] as const;

/** envoy action types the gateway does not take, and why. */
const UNSUPPORTED_ACTIONS: Readonly<Record<string, string>> = {
  metadata: 'reads envoy dynamic metadata, which the gateway does not have',
  dynamic_metadata: 'reads envoy dynamic metadata, which the gateway does not have',
  extension: 'runs an envoy extension',
  query_parameter_value_match: 'is not supported yet',
  query_parameters: 'is not supported yet',
};

const RATE_LIMIT_FIELDS: FieldSet = {
  what: 'a rate_limits item',
  names: ['actions', 'hits_addend', 'apply_on_stream_done', 'stage', 'disable_key', 'limit'],
  misplaced: Object.fromEntries(ACTION_TYPES.map((type) => [type, 'is an action: write it in actions (- actions: [{ ... }])'])),
};

const ACTION_FIELDS: FieldSet = { what: 'an action', names: [...ACTION_TYPES, ...Object.keys(UNSUPPORTED_ACTIONS)], misplaced: {} };
const REQUEST_HEADERS_FIELDS: FieldSet = { what: 'request_headers', names: ['header_name', 'descriptor_key', 'skip_if_absent'], misplaced: {} };
const GENERIC_KEY_FIELDS: FieldSet = { what: 'generic_key', names: ['descriptor_value', 'descriptor_key'], misplaced: {} };
const HEADER_VALUE_MATCH_FIELDS: FieldSet = { what: 'header_value_match', names: ['descriptor_value', 'descriptor_key', 'expect_match', 'headers'], misplaced: {} };
const MASKED_REMOTE_ADDRESS_FIELDS: FieldSet = { what: 'masked_remote_address', names: ['v4_prefix_mask_len', 'v6_prefix_mask_len'], misplaced: {} };
const NO_FIELDS: FieldSet = { what: 'this action', names: [], misplaced: {} };
const HITS_ADDEND_FIELDS: FieldSet = { what: 'hits_addend', names: ['number', 'format'], misplaced: {} };

/** The settings each action type takes (none: `{}`). */
const FIELD_SETS: Partial<Record<(typeof ACTION_TYPES)[number], FieldSet>> = {
  request_headers: REQUEST_HEADERS_FIELDS,
  generic_key: GENERIC_KEY_FIELDS,
  header_value_match: HEADER_VALUE_MATCH_FIELDS,
  masked_remote_address: MASKED_REMOTE_ADDRESS_FIELDS,
};

/** Most hits one descriptor may add (envoy's is a uint32; ours must fit a cost). */
const MAX_HITS_ADDEND = 1_000_000;

/** Reads `rate_limits:` (absent: none). */
export function readRateLimits(reader: DocumentReader, entry: Entry | undefined): RateLimitConfig[] {
  const expected = { list: 'a list of { actions: [...] }', item: 'a rate limit like { actions: [{ remote_address: {} }] }' };
  const configs = readMappings(reader, entry, expected, (map, path) => readRateLimit(reader, map, path));
  // One check takes at most this many descriptors: a route with more could never be decided.
  if (configs.length > MAX_DESCRIPTORS) reader.report(entry!.value, entry!.path, `a route has at most ${MAX_DESCRIPTORS} rate limits (one check's descriptors), got ${configs.length}`);
  return configs;
}

function readRateLimit(reader: DocumentReader, map: YAMLMap, path: string): RateLimitConfig | undefined {
  const fields = reader.entries(map, path, RATE_LIMIT_FIELDS);
  for (const name of ['stage', 'disable_key', 'limit']) {
    const entry = fields.get(name);
    if (entry !== undefined) reader.report(entry.key, entry.path, `envoy's ${name} is not supported by the gateway; remove it`);
  }
  const actionsEntry = fields.get('actions');
  if (actionsEntry?.value === undefined) {
    reportMissing(reader, map, path, 'actions', 'list what the descriptor is made of, e.g. actions: [{ remote_address: {} }]');
    return undefined;
  }
  const items = reader.list(actionsEntry.value, actionsEntry.path, 'a list of actions') ?? [];
  if (items.length === 0) reader.report(actionsEntry.value, actionsEntry.path, 'actions is empty; give at least one action');
  if (items.length > MAX_ENTRIES) reader.report(actionsEntry.value, actionsEntry.path, `a rate limit has at most ${MAX_ENTRIES} actions (one descriptor's entries), got ${items.length}`);
  const actions = items.map((item) => (item.node === undefined ? undefined : readAction(reader, item.node, item.path)));
  const hitsAddend = readHitsAddend(reader, fields.get('hits_addend'));
  const applyOnStreamDone = readFlag(reader, fields.get('apply_on_stream_done')) ?? false;
  if (actions.some((action) => action === undefined)) return undefined;
  return { actions: actions as RateLimitAction[], ...(hitsAddend !== undefined ? { hitsAddend } : {}), applyOnStreamDone };
}

/** envoy's `hits_addend: { number: N }` (a bare N is taken too). */
function readHitsAddend(reader: DocumentReader, entry: Entry | undefined): number | undefined {
  if (entry?.value === undefined) return undefined;
  const map = entry.value;
  if (!isMap(map)) return readWholeNumber(reader, entry, 0, MAX_HITS_ADDEND);
  const fields = reader.entries(map, entry.path, HITS_ADDEND_FIELDS);
  const format = fields.get('format');
  if (format !== undefined) reader.report(format.key, format.path, 'hits_addend.format (substitution from request data) is not supported; give number');
  const number = fields.get('number');
  if (number === undefined) {
    if (format === undefined) reportMissing(reader, map, entry.path, 'number', 'give the hits, e.g. hits_addend: { number: 5 }');
    return undefined;
  }
  return readWholeNumber(reader, number, 0, MAX_HITS_ADDEND);
}

/** One action: a mapping with exactly one key, its type. */
function readAction(reader: DocumentReader, node: NonNullable<Entry['value']>, path: string): RateLimitAction | undefined {
  const map = reader.mapping(node, path, `an action like { remote_address: {} }; the types are ${ACTION_TYPES.join(', ')}`);
  if (map === undefined) return undefined;
  if (map.items.length !== 1) {
    reader.report(map, path, `an action has exactly one type (${ACTION_TYPES.join(', ')}); write each as its own list item`);
    return undefined;
  }
  const fields = reader.entries(map, path, ACTION_FIELDS);
  const [entry] = [...fields.values()];
  if (entry === undefined) return undefined;
  const unsupported = UNSUPPORTED_ACTIONS[entry.name];
  if (unsupported !== undefined) {
    reader.report(entry.key, entry.path, `the ${entry.name} action ${unsupported}; the gateway takes ${ACTION_TYPES.join(', ')}`);
    return undefined;
  }
  return readActionBody(reader, entry);
}

function readActionBody(reader: DocumentReader, entry: Entry): RateLimitAction | undefined {
  const type = entry.name as (typeof ACTION_TYPES)[number];
  const body = entry.value === undefined ? undefined : reader.mapping(entry.value, entry.path, `${type}'s settings (a mapping, {} when it has none)`);
  if (entry.value !== undefined && body === undefined) return undefined;
  const fieldSet = FIELD_SETS[type] ?? NO_FIELDS;
  const fields = body === undefined ? new Map<string, Entry>() : reader.entries(body, entry.path, fieldSet);
  const required = (name: string, fix: string): string | undefined => {
    const value = name === 'header_name' ? readHeaderName(reader, fields.get(name)) : readText(reader, fields.get(name));
    if (!fields.has(name)) {
      if (body === undefined) reader.report(entry.key, joinPath(entry.path, name), `missing ${name}: ${fix}`);
      else reportMissing(reader, body, entry.path, name, fix);
    }
    return value;
  };
  switch (type) {
    case 'source_cluster':
    case 'destination_cluster':
    case 'remote_address':
      return { type };
    case 'masked_remote_address':
      // envoy's defaults: the whole address.
      return { type, v4PrefixLength: readWholeNumber(reader, fields.get('v4_prefix_mask_len'), 0, 32) ?? 32, v6PrefixLength: readWholeNumber(reader, fields.get('v6_prefix_mask_len'), 0, 128) ?? 128 };
    case 'request_headers': {
      const headerName = required('header_name', 'name the request header, e.g. header_name: x-user-id');
      const descriptorKey = required('descriptor_key', 'name the descriptor entry, e.g. descriptor_key: user');
      const skipIfAbsent = readFlag(reader, fields.get('skip_if_absent')) ?? false;
      return headerName === undefined || descriptorKey === undefined ? undefined : { type, headerName, descriptorKey, skipIfAbsent };
    }
    case 'generic_key': {
      const descriptorValue = required('descriptor_value', 'give the value, e.g. descriptor_value: some_limit');
      const descriptorKey = readText(reader, fields.get('descriptor_key')) ?? 'generic_key';
      return descriptorValue === undefined ? undefined : { type, descriptorKey, descriptorValue };
    }
    case 'header_value_match': {
      const descriptorValue = required('descriptor_value', 'give the value, e.g. descriptor_value: gold');
      const descriptorKey = readText(reader, fields.get('descriptor_key')) ?? 'header_match';
      const expectMatch = readFlag(reader, fields.get('expect_match')) ?? true;
      const headersEntry = fields.get('headers');
      if (headersEntry === undefined) required('headers', 'list the header matchers, e.g. headers: [{ name: x-tier, exact: gold }]');
      const headers = readHeaderMatchers(reader, headersEntry);
      return descriptorValue === undefined || headersEntry === undefined ? undefined : { type, descriptorKey, descriptorValue, expectMatch, headers };
    }
  }
}
