/**
 * envoy's RateLimitRequest / RateLimitResponse (proto3 JSON, as envoyproxy/ratelimit's `/json`
 * speaks it, and as @grpc/proto-loader hands them over) to and from Tollgate's check().
 */
import { InvalidCheckError, describeValue } from '../errors.js';
import type { CheckRequest, CheckResult, DescriptorStatus } from '../rules/check.js';
import { ENVOY_UNIT_NAMES } from '../units.js';
import { unknownName } from '../options.js';

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
/** envoy's unit enum names, by Tollgate's unit. */
export const UNIT_NAMES: Readonly<Record<string, string>> = ENVOY_UNIT_NAMES;

/** Validates an envoy request and turns it into a check request. */
export function fromEnvoyRequest(body: unknown, now?: number): CheckRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidCheckError(`the body must be a RateLimitRequest object, got ${describeValue(body)}`);
  }
  const request = body as EnvoyRequest;
  rejectUnknown(request as Record<string, unknown>, REQUEST_FIELDS, 'request');
  if (!Array.isArray(request.descriptors) || request.descriptors.length === 0) {
    throw new InvalidCheckError('descriptors must be a non-empty array of { entries: [{ key, value }] }');
  }
  const descriptors = request.descriptors.map((descriptor: unknown, i: number) => {
    if (typeof descriptor !== 'object' || descriptor === null) {
      throw new InvalidCheckError(`descriptors[${i}] must be an object, got ${describeValue(descriptor)}`);
    }
    const d = descriptor as Record<string, unknown>;
    rejectUnknown(d, DESCRIPTOR_FIELDS, `descriptors[${i}]`);
    if (!Array.isArray(d.entries)) throw new InvalidCheckError(`descriptors[${i}].entries must be an array`);
    d.entries.forEach((entry: unknown, j: number) => {
      if (typeof entry === 'object' && entry !== null) rejectUnknown(entry as Record<string, unknown>, ENTRY_FIELDS, `descriptors[${i}].entries[${j}]`);
    });
    const hitsAddend = integer(d.hitsAddend ?? d.hits_addend, `descriptors[${i}].hits_addend`);
    return { entries: d.entries as { key: string; value: string }[], ...(hitsAddend !== undefined ? { hitsAddend } : {}) };
  });
  const hits = integer(request.hitsAddend ?? request.hits_addend, 'hits_addend');
  return {
    domain: request.domain as string,
    descriptors,
    ...(hits !== undefined ? { hits } : {}),
    ...(now !== undefined ? { now } : {}),
  };
}

/** envoy's RateLimitResponse in proto3 JSON (camelCase, enums as names). */
export function toEnvoyResponse(result: CheckResult): Record<string, unknown> {
  return {
    overallCode: result.overallCode,
    statuses: result.statuses.map(envoyStatus),
  };
}

function envoyStatus(status: DescriptorStatus): Record<string, unknown> {
  const out: Record<string, unknown> = { code: status.code };
  if (status.currentLimit !== undefined) {
    out.currentLimit = {
      requestsPerUnit: status.currentLimit.requestsPerUnit,
      unit: UNIT_NAMES[status.currentLimit.unit],
      ...(status.currentLimit.name !== undefined ? { name: status.currentLimit.name } : {}),
    };
    out.limitRemaining = status.limitRemaining;
    out.durationUntilReset = `${Math.ceil(status.durationUntilReset / 1000)}s`;
  }
  return out;
}

function rejectUnknown(object: Record<string, unknown>, known: ReadonlySet<string>, where: string): void {
  const field = unknownName(object, known);
  if (field !== undefined) throw new InvalidCheckError(`${where}: unknown field ${JSON.stringify(field)}; known fields are ${[...known].join(', ')}`);
}

/** proto3 JSON sends uint32 as a number or a decimal string. */
function integer(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0 || number > 0xffffffff) {
    throw new InvalidCheckError(`${field} must be a whole number from 0 to 4294967295, got ${describeValue(value)}`);
  }
  return number;
}
