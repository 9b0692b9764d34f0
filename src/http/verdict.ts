/**
 * From a {@link Verdict} to an answer, once for every framework: the reports of every limiter that
 * ran on the request are collected, the headers computed from the decision's own instant, and the
 * 429 body built. The adapters (node.ts, fastify.ts, hono.ts) only say how their framework passes a
 * request on, holds it, or answers it.
 */
import type { DegradedReason } from '../limiter/index.js';
import { collectReports, limitedBody, rateLimitHeaders, retryAfterSeconds, type HeaderList, type HeaderStyle, type LimitedInfo, type LimitReport } from './report.js';

/** The outcome for one request. */
export interface Verdict {
  /** Undefined: the request was skipped or no limit applied (nothing to report). */
  readonly reports: readonly LimitReport[] | undefined;
  readonly allowed: boolean;
  /** Shaping: how long to hold an admitted request before passing it on. */
  readonly delayMs: number;
  /** The store failed and `failureMode` is `closed` with `failClosedStatus` 503: answer 503. */
  readonly unavailable?: boolean;
  /** The store could not decide and a failure mode answered: said in the `Tollgate-Degraded` header. */
  readonly degraded?: DegradedReason;
  /** The instant the decision was made (epoch ms): every header is relative to it. */
  readonly now: number;
  /** The `skip` option said so: not limited at all, no concurrency slot either. */
  readonly skipped?: true;
}

/** How one framework acts on a verdict; `C` is whatever identifies the request and its response. */
export interface VerdictActions<C, R> {
  /** Where reports of several limiters on one request are collected (the framework's request object). */
  reportsHolder(c: C): object;
  /** The request's `Accept` header (problem+json negotiation). */
  accept(c: C): string | undefined;
  /** The store failed and the middleware fails closed: 503 with `headers` (Retry-After, Tollgate-Degraded). */
  unavailable(c: C, headers: HeaderList): R;
  /** No limit applied: go on, without headers. */
  skip(c: C): R;
  /** Admitted: set `headers`, then go on now (`delayMs` 0) or after `delayMs` (shaping). */
  admit(c: C, headers: HeaderList, delayMs: number): R;
  /** Refused: answer 429 (or call the user's `onLimited`). */
  refuse(c: C, headers: HeaderList, info: LimitedInfo): R;
}

/** What the verdict needs of the middleware's settings. */
export interface AnswerSettings {
  readonly headerStyle: HeaderStyle;
  readonly message: string | undefined;
}

/** Acts on `verdict` through the framework's `actions`. */
export function applyVerdict<C, R>(settings: AnswerSettings, verdict: Verdict, c: C, actions: VerdictActions<C, R>): R {
  if (verdict.unavailable === true) return actions.unavailable(c, degradedHeader([['retry-after', '1']], verdict.degraded));
  const own = verdict.reports;
  if (own === undefined) return actions.skip(c);
  const reports = collectReports(actions.reportsHolder(c), own);
  const headers = degradedHeader(rateLimitHeaders(reports, settings.headerStyle, verdict.now), verdict.degraded);
  if (verdict.allowed) return actions.admit(c, headers, verdict.delayMs);
  const body = limitedBody(reports, settings.message, actions.accept(c));
  return actions.refuse(c, headers, { reports, retryAfter: retryAfterSeconds(reports), body });
}

/** A degraded answer says so, whatever the header style: it must never pass for a normal one. */
function degradedHeader(headers: HeaderList, degraded: DegradedReason | undefined): HeaderList {
  if (degraded !== undefined) headers.push([DEGRADED_HEADER, degraded]);
  return headers;
}

/** Names the failure mode that answered when the store could not: `fail-open`, `fail-closed`, `local-fallback`. */
export const DEGRADED_HEADER = 'tollgate-degraded';
