/**
 * Per-tenant overrides: one limit for one descriptor path with values (`user: acme`), put at
 * runtime over the rules, optionally until an expiry. An override is written in the rules' shape
 * (a domain and nested descriptors, each with a value, the last with a `rate_limit`) plus
 * `expires`; this module reads and checks that input (YAML documents or JSON, one object or an
 * array), and the stored form the nodes share. Where an override goes into the rule tree is the
 * holder's business (ruleset.ts): this module knows nothing of compiled rules.
 */
import { parseAllDocuments } from 'yaml';
import { parseDuration } from '../duration.js';
import { RulesError, describeValue } from '../errors.js';
import { parseRules } from './parse/index.js';
import type { DescriptorConfig } from './types.js';

/** Overrides held at once (all domains): a put past it is refused. */
export const MAX_OVERRIDES = 1_000;
/** Overrides in one put. */
export const MAX_OVERRIDES_PER_PUT = 100;
/** Bytes of one put's body. */
export const MAX_OVERRIDE_BYTES = 256 * 1024;

/** One (key, value) of an override's path. */
export interface OverrideEntry {
  readonly key: string;
  readonly value: string;
}

/** An override as written: the rules' shape plus `expires`. */
export interface OverrideInput {
  readonly domain: string;
  /** One descriptor per level, each with a value; the last carries the `rate_limit`. */
  readonly descriptors: readonly unknown[];
  /** An absolute ISO 8601 time (`2026-12-01T00:00:00Z`) or a duration from now (`30m`, `24h`, `7d`). */
  readonly expires?: string | number;
}

/** An override, checked. */
export interface Override {
  /** `domain|key=value|…`: names the override (one per domain and path). */
  readonly id: string;
  readonly domain: string;
  readonly entries: readonly OverrideEntry[];
  /** The last descriptor, validated as a rule: its `rateLimit` is the override's limit. */
  readonly descriptor: DescriptorConfig;
  /** Epoch ms it stops applying at; absent: until deleted. */
  readonly expiresAt?: number;
  /** Epoch ms it was put at. */
  readonly createdAt: number;
  /** The override as written (without `expires`), kept to store and show it. */
  readonly written: { readonly domain: string; readonly descriptors: readonly unknown[] };
}

const FIELDS = new Set(['domain', 'descriptors', 'expires']);

/** Reads a put's body: YAML documents or JSON, each one override or an array of them. */
export function readOverrides(text: string, now: number, source = 'overrides'): Override[] {
  if (Buffer.byteLength(text, 'utf8') > MAX_OVERRIDE_BYTES) throw problem(source, '', `the body is over ${MAX_OVERRIDE_BYTES} bytes: put fewer overrides at once`);
  const items: unknown[] = [];
  for (const document of parseAllDocuments(text)) {
    if (!('errors' in document) || document.errors.length > 0) {
      const first = 'errors' in document ? document.errors[0] : undefined;
      throw problem(source, '', `not YAML or JSON: ${first?.message.split('\n')[0] ?? 'unreadable'}`);
    }
    const value: unknown = document.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) continue;
    items.push(...(Array.isArray(value) ? (value as unknown[]) : [value]));
  }
  return checkOverrides(items, now, source);
}

/** Checks overrides given as objects (the library's `putOverride`, or a parsed body). */
export function checkOverrides(items: readonly unknown[], now: number, source = 'overrides'): Override[] {
  if (items.length === 0) throw problem(source, '', 'no override here: write { domain, descriptors: [{ key, value, rate_limit }], expires? }');
  if (items.length > MAX_OVERRIDES_PER_PUT) throw problem(source, '', `${items.length} overrides in one put; at most ${MAX_OVERRIDES_PER_PUT}`);
  const overrides = items.map((item, i) => checkOverride(item, now, items.length === 1 ? source : `${source}[${i}]`));
  const ids = new Set<string>();
  for (const override of overrides) {
    if (ids.has(override.id)) throw problem(source, '', `the override ${override.id} is given twice in one put`);
    ids.add(override.id);
  }
  return overrides;
}

/** One override: the rules' validator checks its descriptors and limit; the path must be one value per level. */
export function checkOverride(item: unknown, now: number, source: string, createdAt = now): Override {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) throw problem(source, '', `an override is { domain, descriptors, expires? }, got ${describeValue(item)}`);
  const record = item as Record<string, unknown>;
  const unknown = Object.keys(record).find((name) => !FIELDS.has(name));
  if (unknown !== undefined) throw problem(source, unknown, `unknown field: an override has domain, descriptors and expires only`);
  const written = { domain: record.domain as string, descriptors: record.descriptors as unknown[] };
  const [domain] = parseRules(JSON.stringify(written), source);
  if (domain === undefined) throw problem(source, 'domain', 'no domain here');
  const { entries, descriptor } = onePath(domain.descriptors, source);
  const expiresAt = record.expires === undefined ? undefined : expiryOf(record.expires, now, source);
  const id = overrideId(domain.domain, entries);
  return { id, domain: domain.domain, entries, descriptor, ...(expiresAt !== undefined ? { expiresAt } : {}), createdAt, written };
}

/** The path of an override: one descriptor per level, each with a plain value; a limit on the last only. */
function onePath(descriptors: readonly DescriptorConfig[], source: string): { entries: OverrideEntry[]; descriptor: DescriptorConfig } {
  const entries: OverrideEntry[] = [];
  let level = descriptors;
  let at = 'descriptors';
  for (;;) {
    if (level.length !== 1) throw problem(source, at, `an override names one descriptor per level (a path like user: acme), got ${level.length}`);
    const descriptor = level[0]!;
    at += '[0]';
    if (descriptor.value === undefined || descriptor.value.includes('*')) {
      throw problem(source, `${at}.value`, `an override is for one value (a tenant): give a value without "*" to descriptor ${JSON.stringify(descriptor.key)}`);
    }
    entries.push({ key: descriptor.key, value: descriptor.value });
    if (descriptor.descriptors.length === 0) {
      if (descriptor.rateLimit === undefined) throw problem(source, `${at}.rate_limit`, 'the last descriptor of an override needs its rate_limit');
      return { entries, descriptor };
    }
    if (descriptor.rateLimit !== undefined) throw problem(source, `${at}.rate_limit`, 'an override sets one limit: put rate_limit on the last descriptor only');
    level = descriptor.descriptors;
    at += '.descriptors';
  }
}

/** `expires`: an ISO time after now, or a duration with its unit from now. */
function expiryOf(expires: unknown, now: number, source: string): number {
  if (typeof expires === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(expires)) {
    const at = Date.parse(expires);
    if (Number.isNaN(at)) throw problem(source, 'expires', `${JSON.stringify(expires)} is not an ISO 8601 time (e.g. 2026-12-01T00:00:00Z)`);
    if (at <= now) throw problem(source, 'expires', `${expires} is already past: give a later time or a duration like "24h"`);
    return at;
  }
  if (typeof expires === 'number') throw problem(source, 'expires', `give a unit: a duration like "30m", "24h", "7d", or an ISO time, got ${expires}`);
  const ms = parseDuration(expires);
  if (typeof ms === 'string') throw problem(source, 'expires', `a duration like "30m", "24h", "7d", or an ISO time like 2026-12-01T00:00:00Z: ${ms}`);
  return now + ms;
}

/** `domain|key=value|…`, with `%`, `|` and `=` escaped so two paths never share a name. */
export function overrideId(domain: string, entries: readonly OverrideEntry[]): string {
  return [escape(domain), ...entries.map(({ key, value }) => `${escape(key)}=${escape(value)}`)].join('|');
}

function escape(part: string): string {
  return part.replace(/%/g, '%25').replace(/\|/g, '%7C').replace(/=/g, '%3D');
}

/** The stored form of an override (JSON): what it was written as, its expiry and creation. */
export function storedOverride(override: Override): string {
  return JSON.stringify({ ...override.written, ...(override.expiresAt !== undefined ? { expiresAt: override.expiresAt } : {}), createdAt: override.createdAt });
}

/** An override read back from its stored form (its expiry kept as stored, even if past). */
export function restoredOverride(text: string, source: string): Override {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw problem(source, '', 'the stored override is not JSON; put it again');
  }
  const { expiresAt, createdAt, ...written } = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  const override = checkOverride(written, 0, source, typeof createdAt === 'number' ? createdAt : 0);
  return typeof expiresAt === 'number' ? { ...override, expiresAt } : override;
}

/** An override as listed (GET /v1/overrides, `holder.overrides()`). */
export interface ListedOverride {
  readonly id: string;
  readonly domain: string;
  readonly entries: readonly OverrideEntry[];
  readonly rateLimit: { readonly unit?: string; readonly requestsPerUnit?: number; readonly unlimited: boolean; readonly algorithm: string };
  /** ISO time, or null: until deleted. */
  readonly expires: string | null;
  readonly createdAt: string;
  /** The path of the rule it shadows, or null when no rule matches its path any more (it applies nowhere). */
  readonly shadows: string | null;
}

export function listed(override: Override, shadows: string | undefined): ListedOverride {
  const limit = override.descriptor.rateLimit!;
  return {
    id: override.id,
    domain: override.domain,
    entries: override.entries,
    rateLimit: { ...(limit.unit !== undefined ? { unit: limit.unit } : {}), ...(limit.requestsPerUnit !== undefined ? { requestsPerUnit: limit.requestsPerUnit } : {}), unlimited: limit.unlimited, algorithm: limit.algorithm },
    expires: override.expiresAt === undefined ? null : new Date(override.expiresAt).toISOString(),
    createdAt: new Date(override.createdAt).toISOString(),
    shadows: shadows ?? null,
  };
}

function problem(source: string, path: string, message: string): RulesError {
  return new RulesError(source, 1, 1, path, message);
}
