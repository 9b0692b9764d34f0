/**
 * What a response says about the caller's quota, read from every rate-limit header style in use:
 * `Retry-After` (seconds or an HTTP-date), `X-RateLimit-Limit/Remaining/Reset` (Reset as epoch
 * seconds, as Tollgate and GitHub send, or as delta seconds), the IETF drafts' `RateLimit-Policy` /
 * `RateLimit` fields (draft 8 and later: `"name";q=100;w=60` and `"name";r=50;t=30`; draft 7:
 * `RateLimit: limit=100, remaining=50, reset=30`; draft 6: `RateLimit-Limit/Remaining/Reset`).
 * A malformed header is ignored, never thrown: the client then knows less, nothing worse.
 */
import { parseMembers, type FieldMember } from './structured-field.js';

/** A response's quota, as far as its headers tell. Durations are ms from the instant it was read. */
export interface RateLimitInfo {
  /** Requests allowed per window. */
  readonly limit?: number;
  /** The window `limit` counts over (the policy's `w`), when a header gives it. */
  readonly windowMs?: number;
  /** Requests left in the current window. */
  readonly remaining?: number;
  /** Time until the quota is whole again. */
  readonly resetMs?: number;
  /** Time the server asked the caller to wait (`Retry-After`). */
  readonly retryAfterMs?: number;
}

/**
 * A reset value this large is a point in time (epoch seconds, 2001 onwards), anything smaller a
 * count of seconds from now: no server asks a client to wait 31 years.
 */
const EPOCH_SECONDS_FROM = 1_000_000_000;

/**
 * Reads the rate-limit headers of a response at `now` (epoch ms, the client's clock). Where several
 * styles are present, each field is taken from the newest style that has it: the IETF List form,
 * then draft 7, then draft 6, then `X-RateLimit-*`.
 */
export function readRateLimit(headers: Headers, now: number): RateLimitInfo {
  const sources = [ietfList(headers), draft7(headers), draft6(headers), legacy(headers, now)];
  const pick = (field: keyof RateLimitInfo): number | undefined => sources.find((source) => source[field] !== undefined)?.[field];
  const info: { -readonly [K in keyof RateLimitInfo]: number } = {};
  for (const field of ['limit', 'windowMs', 'remaining', 'resetMs'] as const) {
    const value = pick(field);
    if (value !== undefined) info[field] = value;
  }
  const retryAfterMs = parseRetryAfter(headers.get('retry-after'), now);
  if (retryAfterMs !== undefined) info.retryAfterMs = retryAfterMs;
  return info;
}

/** `Retry-After` in ms from `now`: delay-seconds, or an HTTP-date (a date in the past is 0). */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d{1,10}(?:\.\d{1,3})?$/.test(text)) return Math.ceil(Number(text) * 1000);
  // An HTTP-date names a weekday and a month; a bare number that failed above is not one.
  if (!/^[A-Za-z]{3}, /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

/** A count (limit, remaining): a non-negative integer, else undefined. */
function count(value: unknown): number | undefined {
  if (typeof value === 'string') value = /^\s*\d{1,15}\s*$/.test(value) ? Number(value) : undefined;
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** Non-negative seconds (an integer or a decimal) as ms, else undefined. */
function secondsAsMs(value: unknown): number | undefined {
  if (typeof value === 'string') value = /^\s*\d{1,15}(?:\.\d{1,3})?\s*$/.test(value) ? Number(value) : undefined;
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.ceil(value * 1000) : undefined;
}

/** A reset given as epoch seconds or delta seconds, as ms from `now`. */
function resetFrom(value: string | null, now: number): number | undefined {
  const ms = secondsAsMs(value ?? undefined);
  if (ms === undefined) return undefined;
  return ms >= EPOCH_SECONDS_FROM * 1000 ? Math.max(0, ms - now) : ms;
}

/** A member's policy name: a String (`"default"`) or a Token (`default`). */
function nameOf(member: FieldMember): string | undefined {
  if (typeof member.value === 'string') return member.value;
  return member.value === true ? member.key : undefined;
}

/** Draft 8 and later: the binding limit (fewest remaining; ties: the later reset) and its policy. */
function ietfList(headers: Headers): RateLimitInfo {
  const limits = parseMembers(headers.get('ratelimit')).filter((member) => member.params.has('r'));
  let binding: { name: string | undefined; remaining: number; resetMs: number | undefined } | undefined;
  for (const member of limits) {
    const remaining = count(member.params.get('r'));
    if (remaining === undefined) continue;
    const resetMs = secondsAsMs(member.params.get('t'));
    if (binding === undefined || remaining < binding.remaining || (remaining === binding.remaining && (resetMs ?? 0) > (binding.resetMs ?? 0))) {
      binding = { name: nameOf(member), remaining, resetMs };
    }
  }
  const policies = parseMembers(headers.get('ratelimit-policy')).filter((member) => member.params.has('q'));
  const policy = policies.find((member) => nameOf(member) === binding?.name) ?? (policies.length === 1 ? policies[0] : undefined);
  return {
    limit: count(policy?.params.get('q')),
    windowMs: windowOf(policy),
    remaining: binding?.remaining,
    resetMs: binding?.resetMs,
  };
}

function windowOf(policy: FieldMember | undefined): number | undefined {
  const ms = secondsAsMs(policy?.params.get('w'));
  return ms === undefined || ms === 0 ? undefined : ms;
}

/** Draft 7: `RateLimit: limit=100, remaining=50, reset=30` and `RateLimit-Policy: 100;w=60`. */
function draft7(headers: Headers): RateLimitInfo {
  const fields = new Map(parseMembers(headers.get('ratelimit')).flatMap((member) => (member.key === undefined ? [] : [[member.key, member.value] as const])));
  return { limit: count(fields.get('limit')), windowMs: draft6Window(headers), remaining: count(fields.get('remaining')), resetMs: secondsAsMs(fields.get('reset')) };
}

/** Draft 6: `RateLimit-Limit` (its first member), `RateLimit-Remaining`, `RateLimit-Reset` (delta seconds). */
function draft6(headers: Headers): RateLimitInfo {
  const limit = parseMembers(headers.get('ratelimit-limit'))[0];
  return {
    limit: count(limit?.value),
    windowMs: windowOf(limit) ?? draft6Window(headers),
    remaining: count(headers.get('ratelimit-remaining') ?? undefined),
    resetMs: secondsAsMs(headers.get('ratelimit-reset') ?? undefined),
  };
}

/** Drafts 6 and 7 write the policy as a number with a window: `100;w=60`. */
function draft6Window(headers: Headers): number | undefined {
  return windowOf(parseMembers(headers.get('ratelimit-policy')).find((member) => typeof member.value === 'number'));
}

/** `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch or delta seconds). */
function legacy(headers: Headers, now: number): RateLimitInfo {
  return {
    limit: count(headers.get('x-ratelimit-limit') ?? undefined),
    remaining: count(headers.get('x-ratelimit-remaining') ?? undefined),
    resetMs: resetFrom(headers.get('x-ratelimit-reset'), now),
  };
}
