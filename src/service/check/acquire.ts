/**
 * Concurrency slots as the service answers them: `POST /v1/acquire` `{ key, limit, ttl, id? }`
 * takes a slot through the limiter (200 granted, 429 refused with `Retry-After`), `POST /v1/release`
 * `{ key, id }` frees it from any node (200, `released` says whether a held slot was freed). An
 * operator's block on the key refuses an acquire without asking the store, as for `/v1/limit`.
 * Every answer is a `slot` event for metrics and the dashboard.
 */
import { InvalidCheckError, describeValue } from '../../errors.js';
import type { Permit } from '../../limiter/index.js';
import type { CheckRequest } from '../../rules/check.js';
import type { ServiceContext, SlotEvent } from '../context.js';
import { DEGRADED_HEADER, UNAVAILABLE_ANSWER, degradedAnswer } from './decide.js';

/** An answer: its status, JSON body and headers. */
export interface SlotReply {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Record<string, string>;
}

/** The body's fields, checked to be an object of only `fields`. */
function fieldsOf(body: unknown, fields: readonly string[]): Record<string, unknown> {
  const shape = `{ ${fields.join(', ')} }`;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new InvalidCheckError(`the body must be ${shape}, got ${describeValue(body)}`);
  const unknown = Object.keys(body).find((name) => !fields.includes(name));
  if (unknown !== undefined) throw new InvalidCheckError(`unknown field ${JSON.stringify(unknown)}; the fields are ${fields.join(', ')}`);
  return body as Record<string, unknown>;
}

function announce(ctx: ServiceContext, event: SlotEvent): void {
  try {
    ctx.events.emit('slot', event);
  } catch (error) {
    // A failing listener (metrics, dashboard) must never fail the answer.
    ctx.logger.error({ err: error }, 'a slot listener failed');
  }
}

/** Whether the body names rules (`domain`, `descriptors`) rather than a key and its limit (reserve.ts too). */
export function byRules(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'domain' in body;
}

/** Descriptors as envoy writes them (`{ entries: [...] }`) or as plain objects of key → value, in order (as `/v1/check` takes them; reserve.ts too). */
export function descriptorsOf(descriptors: unknown): CheckRequest['descriptors'] {
  if (!Array.isArray(descriptors)) throw new InvalidCheckError('descriptors must be an array');
  return descriptors.map((descriptor: unknown) =>
    typeof descriptor === 'object' && descriptor !== null && !Array.isArray(descriptor) && !('entries' in descriptor)
      ? { entries: Object.entries(descriptor).map(([key, value]) => ({ key, value: value as string })) }
      : (descriptor as CheckRequest['descriptors'][number]),
  );
}

/** `POST /v1/acquire` with `{ domain, descriptors, id? }`: a slot per descriptor the rules give a concurrency limit. */
async function answerRulesAcquire(ctx: ServiceContext, body: unknown): Promise<SlotReply> {
  const { domain, descriptors, id } = fieldsOf(body, ['domain', 'descriptors', 'id']);
  const result = await ctx.limiter.acquireCheck({ domain: domain as string, descriptors: descriptorsOf(descriptors) }, id as string | undefined);
  for (const status of result.statuses) if (status !== null) announce(ctx, { op: 'acquire', allowed: status.allowed, held: status.held, key: status.key, ...(status.reason !== undefined ? { degraded: status.reason } : {}) });
  const headers: Record<string, string> = result.allowed ? {} : { 'retry-after': String(Math.ceil(result.retryAfter / 1000)) };
  return { status: result.allowed ? 200 : 429, body: result, headers };
}

/** `POST /v1/acquire`. Bad input throws the limiter's typed errors (400). */
export async function answerAcquire(ctx: ServiceContext, body: unknown): Promise<SlotReply> {
  if (byRules(body)) return answerRulesAcquire(ctx, body);
  const { key, limit, ttl, id } = fieldsOf(body, ['key', 'limit', 'ttl', 'id']);
  const blockedFor = typeof key === 'string' ? ctx.blocks.remaining(key, ctx.clock()) : 0;
  if (blockedFor > 0) {
    announce(ctx, { op: 'acquire', allowed: false, held: 0, key: key as string });
    return { status: 429, body: { allowed: false, limit, held: 0, retryAfter: blockedFor, reason: 'blocked' }, headers: { 'retry-after': String(Math.ceil(blockedFor / 1000)) } };
  }
  const permit = await ctx.limiter.acquire(key as string, { limit: limit as number, ttl: ttl as number | string, ...(id === undefined ? {} : { id: id as string }) });
  const degraded = degradedAnswer(ctx, permit.reason);
  announce(ctx, { op: 'acquire', allowed: permit.allowed, held: permit.held, key: key as string, ...(degraded !== undefined ? { degraded: degraded.reason } : {}) });
  if (degraded?.unavailable === true) return { status: 503, body: UNAVAILABLE_ANSWER, headers: { [DEGRADED_HEADER]: degraded.reason, 'retry-after': '1' } };
  const headers: Record<string, string> = permit.allowed ? {} : { 'retry-after': String(Math.ceil(permit.retryAfter / 1000)) };
  if (degraded !== undefined) headers[DEGRADED_HEADER] = degraded.reason;
  return { status: permit.allowed ? 200 : 429, body: permitBody(permit), headers };
}

/** `POST /v1/release`: 200 whether or not a slot was held (releasing is idempotent). */
export async function answerRelease(ctx: ServiceContext, body: unknown): Promise<SlotReply> {
  if (byRules(body)) {
    const { domain, descriptors, id } = fieldsOf(body, ['domain', 'descriptors', 'id']);
    const released = await ctx.limiter.releaseCheck({ domain: domain as string, descriptors: descriptorsOf(descriptors) }, id as string);
    announce(ctx, { op: 'release', allowed: released > 0, held: 0, key: String(domain) });
    return { status: 200, body: { released }, headers: {} };
  }
  const { key, id } = fieldsOf(body, ['key', 'id']);
  const released = await ctx.limiter.release(key as string, id as string);
  announce(ctx, { op: 'release', allowed: released, held: 0, key: key as string });
  return { status: 200, body: { released }, headers: {} };
}

/** A permit as JSON: its fields without `release`. */
function permitBody({ allowed, limit, held, retryAfter, id, expiresAt, now, reason }: Permit): Record<string, unknown> {
  return { allowed, limit, held, retryAfter, id, expiresAt, now, ...(reason !== undefined ? { reason } : {}) };
}
