/**
 * envoy's RateLimitRequest / RateLimitResponse (proto3 JSON, as envoyproxy/ratelimit's `/json`
 * speaks it, and as @grpc/proto-loader hands them over) to and from Tollgate's check(). As in every
 * proto3 JSON parser, a field left out is its default: an entry without `value` has the value "",
 * a descriptor without `entries` has none; unknown fields are refused.
 */
import { InvalidCheckError, describeValue } from '../../errors.js';
import type { CheckRequest, CheckResult, CurrentLimit, DescriptorStatus, LimitOverride, RateLimitDescriptor } from '../../rules/check.js';
import { ENVOY_UNIT_NAMES, RULE_UNIT_NAMES, type RuleUnit } from '../../units.js';
import { unknownName } from '../../options.js';
import { BLOCKED_HEADER, blockedHeaderValue, checkHeaders } from '../../http/headers.js';
import type { ServiceOptions } from '../options.js';

/** proto3 JSON of envoy.service.ratelimit.v3.RateLimitRequest (camelCase or snake_case). */
export interface EnvoyRequest {
  domain?: unknown;
  descriptors?: unknown;
  hits_addend?: unknown;
  hitsAddend?: unknown;
}

const REQUEST_FIELDS = new Set(['domain', 'descriptors', 'hits_addend', 'hitsAddend']);
const DESCRIPTOR_FIELDS = new Set(['entries', 'limit', 'hits_addend', 'hitsAddend']);
const ENTRY_FIELDS = new Set(['key', 'value']);
const OVERRIDE_FIELDS = new Set(['requests_per_unit', 'requestsPerUnit', 'unit']);
/** envoy's unit enum names, by Tollgate's unit. */
export const UNIT_NAMES: Readonly<Record<string, string>> = ENVOY_UNIT_NAMES;
/** envoy.type.v3.RateLimitUnit's numbers (proto3 JSON may send an enum as its number). */
const ENVOY_UNIT_NUMBERS: Readonly<Record<string, number>> = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6, WEEK: 7 };
/** Tollgate's unit by envoy's enum name and number (envoy.type.v3.RateLimitUnit). */
const UNIT_BY_ENVOY = new Map<string | number, RuleUnit>(
  RULE_UNIT_NAMES.flatMap((unit) => [[ENVOY_UNIT_NAMES[unit], unit] as const, [ENVOY_UNIT_NUMBERS[ENVOY_UNIT_NAMES[unit]]!, unit] as const]),
);

/** Validates an envoy request and turns it into a check request. */
export function fromEnvoyRequest(body: unknown, now?: number): CheckRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidCheckError(`the body must be a RateLimitRequest object, got ${describeValue(body)}`);
  }
  const request = body as EnvoyRequest;
  rejectUnknown(request as Record<string, unknown>, REQUEST_FIELDS, 'request');
  if (request.domain !== undefined && typeof request.domain !== 'string') {
    throw new InvalidCheckError(`domain must be a string, got ${describeValue(request.domain)}`);
  }
  if (!Array.isArray(request.descriptors) || request.descriptors.length === 0) {
    throw new InvalidCheckError('descriptors must be a non-empty array of { entries: [{ key, value }] }');
  }
  const hits = integer(request.hitsAddend ?? request.hits_addend, 'hits_addend');
  return {
    domain: request.domain ?? '',
    descriptors: request.descriptors.map(readDescriptor),
    ...(hits !== undefined ? { hits } : {}),
    ...(now !== undefined ? { now } : {}),
  };
}

/**
 * A parsed `/json` body as the check request itself, without a copy, when it is exactly
 * `{ domain, descriptors: [{ entries: [{ key, value }] }] }` of strings (what envoy sends): such a
 * body is already a valid check request. Any other body goes through {@link fromEnvoyRequest}, which
 * reads defaults, overrides and hits, and words the errors.
 */
export function envoyCheckOf(body: unknown): CheckRequest {
  return isPlainEnvoyRequest(body) ? body : fromEnvoyRequest(body);
}

function isPlainEnvoyRequest(body: unknown): body is CheckRequest {
  if (!isObject(body) || typeof body.domain !== 'string' || !Array.isArray(body.descriptors) || body.descriptors.length === 0) return false;
  for (const field in body) if (field !== 'domain' && field !== 'descriptors') return false;
  for (const descriptor of body.descriptors as unknown[]) {
    if (!isObject(descriptor) || !Array.isArray(descriptor.entries)) return false;
    for (const field in descriptor) if (field !== 'entries') return false;
    for (const entry of descriptor.entries as unknown[]) {
      if (!isObject(entry) || typeof entry.key !== 'string' || typeof entry.value !== 'string') return false;
      for (const field in entry) if (field !== 'key' && field !== 'value') return false;
    }
  }
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readDescriptor(descriptor: unknown, i: number): RateLimitDescriptor {
  if (typeof descriptor !== 'object' || descriptor === null || Array.isArray(descriptor)) {
    throw new InvalidCheckError(`descriptors[${i}] must be an object, got ${describeValue(descriptor)}`);
  }
  const d = descriptor as Record<string, unknown>;
  rejectUnknown(d, DESCRIPTOR_FIELDS, `descriptors[${i}]`);
  const entries = d.entries ?? [];
  if (!Array.isArray(entries)) throw new InvalidCheckError(`descriptors[${i}].entries must be an array, got ${describeValue(entries)}`);
  const hitsAddend = integer(d.hitsAddend ?? d.hits_addend, `descriptors[${i}].hits_addend`);
  const limit = d.limit === undefined || d.limit === null ? undefined : readOverride(d.limit, `descriptors[${i}].limit`);
  return {
    entries: entries.map((entry: unknown, j: number) => readEntry(entry, `descriptors[${i}].entries[${j}]`)),
    ...(hitsAddend !== undefined ? { hitsAddend } : {}),
    ...(limit !== undefined ? { limit } : {}),
  };
}

function readEntry(entry: unknown, where: string): { key: string; value: string } {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new InvalidCheckError(`${where} must be { key, value }, got ${describeValue(entry)}`);
  }
  const { key = '', value = '' } = entry as { key?: unknown; value?: unknown };
  rejectUnknown(entry as Record<string, unknown>, ENTRY_FIELDS, where);
  if (typeof key !== 'string' || typeof value !== 'string') {
    throw new InvalidCheckError(`${where} must be { key: string, value: string }, got ${describeValue(entry)}`);
  }
  return { key, value };
}

/** RateLimitOverride: `{ requestsPerUnit, unit }`, the unit by enum name or number. */
function readOverride(limit: unknown, where: string): LimitOverride {
  if (typeof limit !== 'object' || Array.isArray(limit)) throw new InvalidCheckError(`${where} must be { requests_per_unit, unit }, got ${describeValue(limit)}`);
  const l = limit as Record<string, unknown>;
  rejectUnknown(l, OVERRIDE_FIELDS, where);
  const requestsPerUnit = integer(l.requestsPerUnit ?? l.requests_per_unit, `${where}.requests_per_unit`) ?? 0;
  return { requestsPerUnit, unit: overrideUnit(l.unit, `${where}.unit`) };
}

/** envoy's RateLimitUnit by name or number; UNKNOWN (the default) is refused: it has no window. */
export function overrideUnit(unit: unknown, where: string): RuleUnit {
  const known = UNIT_BY_ENVOY.get(unit as string | number);
  if (known !== undefined) return known;
  throw new InvalidCheckError(`${where} must be one of ${RULE_UNIT_NAMES.map((u) => ENVOY_UNIT_NAMES[u]).join(', ')} (or its enum number), got ${describeValue(unit ?? 'UNKNOWN')}`);
}

/** What the service adds to envoy's responses, as envoyproxy/ratelimit's settings do. */
export interface EnvoyResponseOptions {
  /** `response_headers_to_add`: envoy's three (LIMIT_RESPONSE_HEADERS_ENABLED) with these names, or Tollgate's `full` set. */
  readonly headers?: EnvoyHeaderNames | 'full';
  /** `dynamic_metadata` (RESPONSE_DYNAMIC_METADATA). */
  readonly dynamicMetadata?: boolean;
}

/** The response options the service's settings ask for. */
export function envoyResponseOptions(ctx: { readonly options: Pick<ServiceOptions, 'responseHeaders' | 'headerNames' | 'responseDynamicMetadata'> }): EnvoyResponseOptions {
  const { responseHeaders, headerNames, responseDynamicMetadata } = ctx.options;
  const headers = responseHeaders === 'envoy' ? headerNames : responseHeaders === 'full' ? ('full' as const) : undefined;
  return { ...(headers !== undefined ? { headers } : {}), dynamicMetadata: responseDynamicMetadata };
}

/**
 * The headers `options` ask for: none, envoy's three, or Tollgate's full set; and, whatever they
 * ask, `tollgate-blocked` when a block refused the check (envoy's answer has no other place to say it).
 */
export function responseHeadersOf(result: CheckResult, options: EnvoyResponseOptions): readonly { key: string; value: string }[] {
  if (options.headers === 'full') return Object.entries(checkHeaders(result)).map(([key, value]) => ({ key, value }));
  const blocked = blockedHeaderValue(result);
  // The default (no headers asked, nothing blocked): one empty list for every answer.
  if (options.headers === undefined && blocked === undefined) return NO_HEADERS;
  const headers = options.headers === undefined ? [] : envoyHeaders(result, options.headers);
  if (blocked !== undefined) headers.push({ key: BLOCKED_HEADER, value: blocked });
  return headers;
}

const NO_HEADERS: readonly { key: string; value: string }[] = Object.freeze([]);

/** envoy's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER. */
export interface EnvoyHeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
}

/**
 * envoy's three rate-limit headers, from the limit closest to denying (an over-limit one first):
 * its requests per unit, what remains, and the seconds until it resets (from the decision instant).
 */
export function envoyHeaders(result: CheckResult, names: EnvoyHeaderNames): { key: string; value: string }[] {
  let closest: DescriptorStatus | undefined;
  for (const status of result.statuses) {
    if (status.currentLimit === undefined || status.shadowOverLimit === true) continue;
    const over = status.code === 'OVER_LIMIT' && status.quotaOverLimit !== true;
    const closestOver = closest !== undefined && closest.code === 'OVER_LIMIT' && closest.quotaOverLimit !== true;
    if (closest === undefined || (over && !closestOver) || (over === closestOver && status.limitRemaining < closest.limitRemaining)) closest = status;
  }
  if (closest === undefined) return [];
  return [
    { key: names.limit, value: String(closest.currentLimit!.requestsPerUnit) },
    { key: names.remaining, value: String(closest.limitRemaining) },
    { key: names.reset, value: String(Math.ceil(closest.durationUntilReset / 1000)) },
  ];
}

/**
 * envoy's `dynamic_metadata`: the request's domain, its descriptors (entries as `key=value`, the
 * override and hits when sent), the request's hits, and the merged `metadata` of the limits that
 * applied and passed.
 */
export function dynamicMetadata(request: CheckRequest, result: CheckResult): Record<string, unknown> {
  return {
    domain: request.domain,
    descriptors: request.descriptors.map((descriptor) => ({
      entries: descriptor.entries.map((entry) => `${entry.key}=${entry.value}`),
      ...(descriptor.limit !== undefined ? { limit: `requests_per_unit:${descriptor.limit.requestsPerUnit} unit:${ENVOY_UNIT_NAMES[descriptor.limit.unit]}` } : {}),
      ...(descriptor.hitsAddend !== undefined ? { hitsAddend: descriptor.hitsAddend } : {}),
    })),
    ...(request.hits ? { hitsAddend: request.hits } : {}),
    ...(result.metadata !== undefined ? { metadata: result.metadata } : {}),
  };
}

/** envoy's RateLimitResponse in proto3 JSON (camelCase, enums as names, defaults left out). */
export function toEnvoyResponse(result: CheckResult, request: CheckRequest, options: EnvoyResponseOptions = {}): Record<string, unknown> {
  const headers = responseHeadersOf(result, options);
  return {
    overallCode: result.overallCode,
    statuses: result.statuses.map(envoyStatus),
    ...(headers.length > 0 ? { responseHeadersToAdd: headers } : {}),
    ...(options.dynamicMetadata === true ? { dynamicMetadata: dynamicMetadata(request, result) } : {}),
  };
}

/**
 * envoy's RateLimitResponse as JSON text: the bytes of `JSON.stringify(toEnvoyResponse(...))`,
 * written straight from the result when the answer is only the overall code and the statuses (no
 * headers to add, no dynamic metadata: the default), else by that.
 */
export function envoyResponseText(result: CheckResult, request: CheckRequest, options: EnvoyResponseOptions = {}): string {
  const plain = options.headers === undefined && options.dynamicMetadata !== true && blockedHeaderValue(result) === undefined;
  const head = plain ? RESPONSE_HEAD[result.overallCode] : undefined;
  if (head === undefined) return JSON.stringify(toEnvoyResponse(result, request, options));
  const { statuses } = result;
  let text = head;
  for (let i = 0; i < statuses.length; i++) {
    const status = envoyStatusText(statuses[i]!);
    if (status === undefined) return JSON.stringify(toEnvoyResponse(result, request, options));
    text = i === 0 ? text + status : `${text},${status}`;
  }
  return `${text}]}`;
}

/** The answer's text up to its first status, by overall code, made once. */
const RESPONSE_HEAD: Readonly<Record<string, string>> = { OK: '{"overallCode":"OK","statuses":[', OVER_LIMIT: '{"overallCode":"OVER_LIMIT","statuses":[' };

/** The JSON of each code, made once. */
const CODE_TEXT: Readonly<Record<string, string>> = { OK: '"OK"', OVER_LIMIT: '"OVER_LIMIT"' };

/**
 * A status's text up to its duration's number, `{"code":…,"currentLimit":{…},"durationUntilReset":"`,
 * by limit (the rules share one limit object per rule, rules/check-decide.ts) then code: made once
 * per rule, not per answer. Null: a limit {@link envoyStatus} writes differently.
 */
const limitHeads = new WeakMap<CurrentLimit, Record<string, string | null>>();

function limitHead(limit: CurrentLimit, code: string): string | undefined {
  let heads = limitHeads.get(limit);
  if (heads === undefined) limitHeads.set(limit, (heads = {}));
  let head = heads[code];
  if (head === undefined) {
    const unit = UNIT_NAMES[limit.unit];
    const name = limit.name !== undefined ? `,"name":${JSON.stringify(limit.name)}` : '';
    head = heads[code] = unit === undefined || typeof limit.requestsPerUnit !== 'number' ? null : `{"code":${CODE_TEXT[code]},"currentLimit":{"requestsPerUnit":${JSON.stringify(limit.requestsPerUnit)},"unit":"${unit}"${name}},"durationUntilReset":"`;
  }
  return head ?? undefined;
}

/** {@link envoyStatus} as JSON text, or undefined for a status it does not write the same way (left to JSON.stringify). */
function envoyStatusText(status: DescriptorStatus): string | undefined {
  const code = CODE_TEXT[status.code];
  const remaining = status.limitRemaining;
  if (code === undefined || typeof remaining !== 'number') return undefined;
  // proto3 JSON leaves a zero out.
  const tail = remaining !== 0 ? `,"limitRemaining":${jsonNumber(remaining)}}` : '}';
  const limit = status.currentLimit;
  if (limit === undefined) return `{"code":${code}${tail}`;
  const head = limitHead(limit, status.code);
  if (head === undefined || typeof status.durationUntilReset !== 'number') return undefined;
  return `${head}${Math.ceil(status.durationUntilReset / 1000)}s"${tail}`;
}

/** A number as JSON.stringify writes it (not finite: null), without its call. */
function jsonNumber(value: number): string {
  return Number.isFinite(value) ? `${value}` : 'null';
}

function envoyStatus(status: DescriptorStatus): Record<string, unknown> {
  const out: Record<string, unknown> = { code: status.code };
  if (status.currentLimit !== undefined) {
    out.currentLimit = {
      requestsPerUnit: status.currentLimit.requestsPerUnit,
      unit: UNIT_NAMES[status.currentLimit.unit],
      ...(status.currentLimit.name !== undefined ? { name: status.currentLimit.name } : {}),
    };
    out.durationUntilReset = `${Math.ceil(status.durationUntilReset / 1000)}s`;
  }
  // proto3 JSON leaves a zero out; an unlimited descriptor reports 4294967295 without a limit.
  if (status.limitRemaining !== 0) out.limitRemaining = status.limitRemaining;
  return out;
}

function rejectUnknown(object: Record<string, unknown>, known: ReadonlySet<string>, where: string): void {
  const field = unknownName(object, known);
  if (field !== undefined) throw new InvalidCheckError(`${where}: unknown field ${JSON.stringify(field)}; known fields are ${[...known].join(', ')}`);
}

/** proto3 JSON sends uint32 / uint64 as a number or a decimal string. */
function integer(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0 || number > 0xffffffff) {
    throw new InvalidCheckError(`${field} must be a whole number from 0 to 4294967295, got ${describeValue(value)}`);
  }
  return number;
}
