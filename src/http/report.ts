/**
 * What a request was told by each limit that applied to it, and the HTTP answer built from that:
 * `X-RateLimit-*` and `Retry-After` headers, the IETF `RateLimit-Policy` / `RateLimit` structured
 * fields (draft-ietf-httpapi-ratelimit-headers-10), and the 429 body.
 *
 * Several limits (one middleware with several policies, or several middlewares on one route) each
 * add a report; the headers are always computed from all of them, so a later limiter never hides
 * an earlier one's tighter quota.
 */
import { createHash } from 'node:crypto';
import { IncomingMessage } from 'node:http';
import { describeWindow } from '../units.js';

/** One limit's verdict on one request. Times are epoch ms, durations ms. */
export interface LimitReport {
  /** Policy name, unique per limiter (`RateLimit-Policy` identifier, `violated-policies`). */
  readonly name: string;
  /** The quota `remaining` counts down from. */
  readonly limit: number;
  /** The policy's window in ms (`w` in `RateLimit-Policy`). */
  readonly windowMs: number;
  /**
   * The policy's rate, requests per window; when it is not {@link limit} (a bucket whose `burst`
   * is its quota) the 429's words say both.
   */
  readonly rate?: number;
  readonly remaining: number;
  /** When the quota is whole again (never before the decision). */
  readonly resetAt: number;
  readonly allowed: boolean;
  /** ms until a retry can pass; 0 when allowed. */
  readonly retryAfter: number;
  /** The store key the limit counted in; hashed into `pk` for the IETF fields. */
  readonly partitionKey: string;
}

/** Which rate-limit headers a response carries. `Retry-After` is sent on every 429 regardless. */
export type HeaderStyle = 'legacy' | 'ietf' | 'both' | 'none';
export const HEADER_STYLES: readonly HeaderStyle[] = ['legacy', 'ietf', 'both', 'none'];

/** `[name, value]` pairs, lower-case names, in a stable order. */
export type HeaderList = Array<[string, string]>;

/**
 * The report the X-RateLimit-* headers describe: a denying one (the longest wait) if any, else
 * the one with the fewest remaining (ties: the later reset). `reports` is non-empty.
 */
export function bindingReport(reports: readonly LimitReport[]): LimitReport {
  let best = reports[0]!;
  for (let i = 1; i < reports.length; i++) {
    const report = reports[i]!;
    if (best.allowed !== report.allowed) {
      if (!report.allowed) best = report;
      continue;
    }
    if (!report.allowed) {
      if (report.retryAfter > best.retryAfter) best = report;
    } else if (report.remaining < best.remaining || (report.remaining === best.remaining && report.resetAt > best.resetAt)) {
      best = report;
    }
  }
  return best;
}

/** Whole seconds a client waits: never less than 1, never earlier than the real retry time. */
export function retryAfterSeconds(reports: readonly LimitReport[]): number {
  let wait = 0;
  for (const report of reports) if (!report.allowed && report.retryAfter > wait) wait = report.retryAfter;
  return Math.max(1, Math.ceil(wait / 1000));
}

/** The headers for `reports` (non-empty) at `now`. */
export function rateLimitHeaders(reports: readonly LimitReport[], style: HeaderStyle, now: number): HeaderList {
  const headers: HeaderList = [];
  let denied = false;
  for (let i = 0; i < reports.length; i++) if (!reports[i]!.allowed) denied = true;
  if (style === 'legacy' || style === 'both') {
    const binding = bindingReport(reports);
    headers.push(
      ['x-ratelimit-limit', limitText.of(binding.limit)],
      ['x-ratelimit-remaining', String(binding.remaining)],
      // Rounded up: a client that waits until this second finds the quota whole.
      ['x-ratelimit-reset', resetText.of(Math.ceil(Math.max(binding.resetAt, now) / 1000))],
    );
  }
  if (style === 'ietf' || style === 'both') {
    headers.push(['ratelimit-policy', reports.map(policyItem).join(', ')], ['ratelimit', reports.map((report) => limitItem(report, now)).join(', ')]);
  }
  if (denied) {
    const wait = String(retryAfterSeconds(reports));
    headers.push(['retry-after', wait]);
    if (style !== 'none') headers.push(['x-ratelimit-retry-after', wait]);
  }
  return headers;
}

/**
 * The decimal text of the last number asked for: a limit, or a reset second, is the same from one
 * request to the next, so its string is made once rather than per response.
 */
class LastNumberText {
  private value = NaN;
  private text = '';

  of(value: number): string {
    if (value !== this.value) {
      this.value = value;
      this.text = String(value);
    }
    return this.text;
  }
}
const limitText = new LastNumberText();
const resetText = new LastNumberText();

/**
 * A `RateLimit-Policy` item depends on the policy and the partition key only, not on the request:
 * the last one made is reused while they stay the same (one client, one policy: most requests).
 */
let lastPolicyItem: { name: string; limit: number; windowMs: number; partitionKey: string; text: string } | undefined;

function policyItem(report: LimitReport): string {
  const last = lastPolicyItem;
  if (last !== undefined && last.name === report.name && last.limit === report.limit && last.windowMs === report.windowMs && last.partitionKey === report.partitionKey) {
    return last.text;
  }
  const text = `${sfString(report.name)};q=${report.limit};w=${Math.max(1, Math.ceil(report.windowMs / 1000))};pk=${partitionKeyHash(report.partitionKey)}`;
  lastPolicyItem = { name: report.name, limit: report.limit, windowMs: report.windowMs, partitionKey: report.partitionKey, text };
  return text;
}

function limitItem(report: LimitReport, now: number): string {
  const reset = Math.max(0, Math.ceil((report.resetAt - now) / 1000));
  return `${sfString(report.name)};r=${report.remaining};t=${reset};pk=${partitionKeyHash(report.partitionKey)}`;
}

/** The last name quoted: a limiter's policy names are the same from one request to the next. */
let lastSfName = '';
let lastSfText = '""';

/** A structured-field String: printable ASCII only, `"` and `\` escaped. */
function sfString(text: string): string {
  if (text === lastSfName) return lastSfText;
  const quoted = `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, '\\$&')}"`;
  lastSfName = text;
  lastSfText = quoted;
  return quoted;
}

/** `pk` as a structured-field Byte Sequence: 12 bytes of SHA-256, so the key itself never leaks. */
const pkCache = new Map<string, string>();
function partitionKeyHash(key: string): string {
  let hashed = pkCache.get(key);
  if (hashed === undefined) {
    hashed = `:${createHash('sha256').update(key).digest().subarray(0, 12).toString('base64')}:`;
    if (pkCache.size >= 4096) pkCache.clear();
    pkCache.set(key, hashed);
  }
  return hashed;
}

/** The 503 body when the store failed and `failureMode` is `closed` (sent with `Retry-After: 1`). */
export const UNAVAILABLE_BODY = '{"error":"rate_limiter_unavailable","message":"The rate limiter cannot reach its store; retry shortly."}';

/** The IETF problem type for an exceeded quota. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** What a 429 says, before it is serialized. */
export interface LimitedBody {
  readonly contentType: string;
  readonly text: string;
}

/**
 * The 429 body: `{ error: 'rate_limited', message, limit, remaining, retryAfter, 'violated-policies' }`
 * (seconds; the names of the limits that denied), or an RFC 9457 problem of type `quota-exceeded` when the client prefers `application/problem+json`.
 */
export function limitedBody(reports: readonly LimitReport[], message: string | undefined, accept: string | undefined): LimitedBody {
  const binding = bindingReport(reports);
  const retryAfter = retryAfterSeconds(reports);
  const problem = accept !== undefined && prefersProblem(accept);
  // A client hammering past its limit gets the same body many times a second: reuse the last one.
  const last = lastBody;
  if (
    reports.length === 1 &&
    last !== undefined &&
    last.problem === problem &&
    last.limit === binding.limit &&
    last.remaining === binding.remaining &&
    last.retryAfter === retryAfter &&
    last.windowMs === binding.windowMs &&
    last.rate === binding.rate &&
    last.name === binding.name &&
    last.message === message
  ) {
    return last.body;
  }
  const text = message ?? defaultMessage(binding, retryAfter);
  // Which limits fired, by name (a rule's `name`, else its path): the same field in both bodies.
  const violated = reports.filter((report) => !report.allowed).map((report) => report.name);
  const body: LimitedBody = problem
    ? {
        contentType: 'application/problem+json',
        text: JSON.stringify({
          type: QUOTA_EXCEEDED_TYPE,
          title: 'Request cannot be satisfied as assigned quota has been exceeded',
          status: 429,
          detail: text,
          'violated-policies': violated,
          limit: binding.limit,
          remaining: binding.remaining,
          retryAfter,
        }),
      }
    : {
        contentType: 'application/json; charset=utf-8',
        text: JSON.stringify({ error: 'rate_limited', message: text, limit: binding.limit, remaining: binding.remaining, retryAfter, 'violated-policies': violated }),
      };
  if (reports.length === 1) {
    lastBody = { problem, limit: binding.limit, remaining: binding.remaining, retryAfter, windowMs: binding.windowMs, rate: binding.rate, name: binding.name, message, body };
  }
  return body;
}

/** The last single-report body and what it was made from. */
let lastBody:
  | { problem: boolean; limit: number; remaining: number; retryAfter: number; windowMs: number; rate: number | undefined; name: string; message: string | undefined; body: LimitedBody }
  | undefined;

/**
 * Whether `Accept` asks for a problem document: `application/problem+json` with a q above 0 and at
 * least that of `application/json` (or `*\/*`). Cheap on purpose: only 429s parse it.
 */
export function prefersProblem(accept: string): boolean {
  if (!accept.includes('application/problem+json')) return false;
  let problem = 0;
  let json = 0;
  for (const item of accept.slice(0, 1024).split(',')) {
    const [type = '', ...params] = item.split(';');
    let q = 1;
    for (const param of params) {
      const [name, value] = param.split('=');
      if (name?.trim().toLowerCase() === 'q') q = Number(value) >= 0 && Number(value) <= 1 ? Number(value) : 0;
    }
    const media = type.trim().toLowerCase();
    if (media === 'application/problem+json') problem = Math.max(problem, q);
    else if (media === 'application/json') json = Math.max(json, q);
  }
  return problem > 0 && problem >= json;
}

function defaultMessage(binding: LimitReport, retryAfter: number): string {
  const per = describeWindow(binding.windowMs);
  const limit = binding.rate === undefined || binding.rate === binding.limit ? `${binding.limit} per ${per}` : `${binding.rate} per ${per}, in bursts of up to ${binding.limit}`;
  return `Too many requests: the limit is ${limit}. Retry in ${retryAfter} s.`;
}


/**
 * Every limiter that ran on one request adds its reports here, on the framework's request object,
 * so the headers of the last one describe all of them. A symbol property, not a WeakMap: a WeakMap
 * entry per request cost about a sixth of the middleware's time, most of it in the garbage collector.
 *
 * Except on a node request whose prototype was swapped (Express gives every request its app's
 * prototype, which V8 keeps in dictionary mode): there V8 adds a property in the runtime, ~3 µs, and
 * a WeakMap entry is the cheaper of the two (measured in one process, 100,000 fresh pairs per round:
 * adding a symbol property to an Express request 2.5–4.4 µs, against 69 ns on node's own).
 */
const REPORTS: unique symbol = Symbol('tollgate.reports');
const SWAPPED_REPORTS = new WeakMap<object, readonly LimitReport[]>();
/** Whether reports went on a node request with node's own prototype (a symbol), or into the WeakMap. */
let plainNodeRequestsSeen = false;
let swappedRequestsSeen = false;

/** Adds `reports` to those already made for `request` and returns all of them. */
export function collectReports(request: object, reports: readonly LimitReport[]): readonly LimitReport[] {
  const holder = request as { [REPORTS]?: readonly LimitReport[] };
  const prototype = Object.getPrototypeOf(request) as unknown;
  if (prototype !== IncomingMessage.prototype && request instanceof IncomingMessage) {
    // A limiter that ran before the prototype was swapped (outside the Express app) left a symbol.
    const earlier = SWAPPED_REPORTS.get(request) ?? (plainNodeRequestsSeen ? holder[REPORTS] : undefined);
    const all = earlier === undefined ? reports : earlier.concat(reports);
    SWAPPED_REPORTS.set(request, all);
    swappedRequestsSeen = true;
    return all;
  }
  if (prototype === IncomingMessage.prototype) plainNodeRequestsSeen = true;
  const earlier = holder[REPORTS] ?? (swappedRequestsSeen ? SWAPPED_REPORTS.get(request) : undefined);
  const all = earlier === undefined ? reports : earlier.concat(reports);
  holder[REPORTS] = all;
  return all;
}

/** What a custom `onLimited` handler is given. The rate-limit headers are already set. */
export interface LimitedInfo {
  /** Every limit that applied to the request, this middleware's and earlier ones'. */
  readonly reports: readonly LimitReport[];
  /** Whole seconds, as in `Retry-After`. */
  readonly retryAfter: number;
  /** The body Tollgate would send (JSON, or a problem document if the client asked for one). */
  readonly body: LimitedBody;
}
