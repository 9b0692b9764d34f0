/**
 * Reading `descriptors:` lists (nested): each descriptor's key, value, flags, limit and children,
 * with envoy's checks (a non-empty key, no two siblings with the same key and value,
 * `share_threshold` only on wildcard values) and the loader's bounds on depth and count.
 */
import { freezeNode, readFlag, readText, reportMissing } from './fields.js';
import type { DocumentReader, Entry, FieldSet, ListItem } from './fields.js';
import { readConcurrency } from './concurrency.js';
import { readLedger } from './ledger.js';
import { readRateLimit } from './rate-limit.js';
import { RULES_LIMITS, offsetOf } from './yaml.js';
import type { YAMLMap } from 'yaml';
import type { DescriptorConfig } from '../types.js';

const IN_RATE_LIMIT = 'belongs inside rate_limit, not directly in the descriptor';

/** The keys of a descriptor. */
export const DESCRIPTOR_FIELDS: FieldSet = {
  what: 'a descriptor',
  names: ['key', 'value', 'rate_limit', 'descriptors', 'shadow_mode', 'detailed_metric', 'value_to_metric', 'quota_mode', 'share_threshold', 'metadata', 'concurrency', 'ledger'],
  misplaced: {
    unit: IN_RATE_LIMIT,
    requests_per_unit: IN_RATE_LIMIT,
    unlimited: IN_RATE_LIMIT,
    name: IN_RATE_LIMIT,
    replaces: IN_RATE_LIMIT,
    algorithm: IN_RATE_LIMIT,
    burst: IN_RATE_LIMIT,
    precision: IN_RATE_LIMIT,
    unit_multiplier: IN_RATE_LIMIT,
    soft_percent: IN_RATE_LIMIT,
    failure_mode: IN_RATE_LIMIT,
    cost: IN_RATE_LIMIT,
    block_duration: IN_RATE_LIMIT,
    domain: 'belongs at the top of the document, not in a descriptor',
    allow: 'belongs at the top of the document (a domain\'s list, beside descriptors), not in a descriptor',
    deny: 'belongs at the top of the document (a domain\'s list, beside descriptors), not in a descriptor',
  },
};

/** What reading one domain keeps track of across its whole descriptor tree. */
export interface DomainReadState {
  descriptorCount: number;
}

/** Reads a `descriptors:` entry (absent or empty: no descriptors). `depth` is 1 for the top level. */
export function readDescriptorList(reader: DocumentReader, state: DomainReadState, entry: Entry | undefined, depth: number): readonly DescriptorConfig[] {
  if (entry?.value === undefined) return Object.freeze([]);
  const items = reader.list(entry.value, entry.path, 'a list of descriptors (- key: ...)') ?? [];
  if (items.length > 0 && depth > RULES_LIMITS.maxDescriptorDepth) {
    reader.report(entry.key, entry.path, `descriptors nest deeper than ${RULES_LIMITS.maxDescriptorDepth} levels; flatten the tree`);
    return Object.freeze([]);
  }
  const descriptors: DescriptorConfig[] = [];
  const seen = new Map<string, { path: string; line: number }>();
  for (const item of items) {
    const descriptor = readDescriptor(reader, state, item, depth);
    if (descriptor === undefined) continue;
    const identity = JSON.stringify([descriptor.key, descriptor.value ?? null]);
    const first = seen.get(identity);
    if (first === undefined) seen.set(identity, { path: item.path, line: descriptor.location.line });
    else reader.report(item.node, item.path, duplicateProblem(descriptor, first));
    descriptors.push(descriptor);
  }
  return Object.freeze(descriptors);
}

function duplicateProblem(descriptor: DescriptorConfig, first: { path: string; line: number }): string {
  const what = descriptor.value === undefined ? `key ${JSON.stringify(descriptor.key)} with no value` : `key ${JSON.stringify(descriptor.key)} value ${JSON.stringify(descriptor.value)}`;
  return `duplicate descriptor: ${what} is already at ${first.path} (line ${first.line}); merge the two or change the value`;
}

function readDescriptor(reader: DocumentReader, state: DomainReadState, item: ListItem, depth: number): DescriptorConfig | undefined {
  state.descriptorCount += 1;
  if (state.descriptorCount > RULES_LIMITS.maxDescriptorsPerDomain) {
    reader.problems.fatal(offsetOf(item.node ?? item.raw), item.path, `more than ${RULES_LIMITS.maxDescriptorsPerDomain} descriptors in one domain; split it into several domains`);
  }
  if (item.node === undefined) {
    reader.report(item.raw, item.path, 'empty descriptor: write - key: NAME (with value, rate_limit or descriptors as needed)');
    return undefined;
  }
  const map = reader.mapping(item.node, item.path, 'a descriptor mapping (key, value, rate_limit, descriptors)');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, item.path, DESCRIPTOR_FIELDS);
  const key = readKey(reader, fields, map, item.path);
  const valueText = readText(reader, fields.get('value'));
  const value = valueText === '' ? undefined : valueText; // envoy reads an empty value as none
  const rateLimitEntry = fields.get('rate_limit');
  const rateLimit = rateLimitEntry === undefined ? undefined : readRateLimit(reader, rateLimitEntry);
  const descriptor = {
    key,
    value,
    rateLimit,
    shadowMode: readFlag(reader, fields.get('shadow_mode')) ?? false,
    detailedMetric: readFlag(reader, fields.get('detailed_metric')) ?? false,
    valueToMetric: readFlag(reader, fields.get('value_to_metric')) ?? false,
    quotaMode: readFlag(reader, fields.get('quota_mode')) ?? false,
    shareThreshold: readFlag(reader, fields.get('share_threshold')) ?? false,
    ...readMetadata(reader, fields.get('metadata')),
    ...readConcurrency(reader, fields.get('concurrency')),
    ...(rateLimitEntry === undefined || rateLimit !== undefined ? readLedger(reader, fields.get('ledger'), rateLimit) : {}),
    descriptors: readDescriptorList(reader, state, fields.get('descriptors'), depth + 1),
    location: reader.problems.locate(offsetOf(map)),
  };
  if (descriptor.shareThreshold) checkShareThreshold(reader, fields.get('share_threshold')!, value);
  if (descriptor.quotaMode) checkQuotaMode(reader, fields.get('quota_mode')!, descriptor.rateLimit);
  return key === undefined ? undefined : freezeNode({ ...descriptor, key });
}

/** envoy: `metadata` is any mapping, kept as its JSON form; an empty one is none. */
function readMetadata(reader: DocumentReader, entry: Entry | undefined): { metadata?: Readonly<Record<string, unknown>> } {
  if (entry?.value === undefined) return {};
  const map = reader.mapping(entry.value, entry.path, 'a mapping (metadata: { team: payments })');
  if (map === undefined) return {};
  const metadata = reader.toJson(map) as Record<string, unknown>;
  return Object.keys(metadata).length === 0 ? {} : { metadata: deepFreeze(metadata) };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

function readKey(reader: DocumentReader, fields: Map<string, Entry>, map: YAMLMap, path: string): string | undefined {
  const entry = fields.get('key');
  const key = readText(reader, entry);
  if (entry?.value === undefined) {
    reportMissing(reader, map, path, 'key', 'every descriptor needs a key (key: remote_address)');
  } else if (key === '') {
    reader.report(entry.value, entry.path, 'key must not be empty: write the descriptor key to match (key: remote_address)');
    return undefined;
  }
  return key;
}

/**
 * envoy's quota mode counts every hit, over the limit too (usage reported after the fact must not
 * be lost), which only fixed-window counts that way.
 */
function checkQuotaMode(reader: DocumentReader, entry: Entry, rateLimit: DescriptorConfig['rateLimit']): void {
  if (rateLimit?.share !== undefined) {
    reader.report(entry.value, entry.path, 'quota_mode: true counts every hit, over the limit too, which a shared capacity (share) cannot: its group total never passes the limit; remove quota_mode or share');
    return;
  }
  if (rateLimit === undefined || rateLimit.unlimited || rateLimit.algorithm === 'fixed-window') return;
  reader.report(
    entry.value,
    entry.path,
    `quota_mode: true counts every hit, over the limit too, as envoy does; only fixed-window (the default) counts that way, not ${rateLimit.algorithm}: remove algorithm or quota_mode`,
  );
}

/** envoy: `share_threshold` makes every value matching a wildcard share one counter, so it needs a wildcard. */
function checkShareThreshold(reader: DocumentReader, entry: Entry, value: string | undefined): void {
  if (value?.includes('*')) return;
  const has = value === undefined ? 'this descriptor has no value' : `this descriptor's value is ${JSON.stringify(value)}`;
  reader.report(entry.value, entry.path, `share_threshold: true needs a wildcard value (with "*", like value: files/*); ${has}`);
}
