/**
 * The decision service's rate-limit headers, built the same way as the middleware's (report.ts):
 * `X-RateLimit-*` from the binding limit, the IETF `RateLimit-Policy` / `RateLimit` fields naming
 * every limit, and `Retry-After` / `X-RateLimit-Retry-After` when throttled.
 */
import type { Decision } from '../decision.js';
import type { CheckResult, DescriptorStatus } from '../rules/check.js';
import { ruleWindowMs } from '../units.js';
import { rateLimitHeaders, type LimitReport } from './report.js';

/**
 * Headers for one decision of `/v1/limit`; the policy is named `default` and keyed by `key`. Times
 * are relative to the instant the decision was made.
 */
export function decisionHeaders(decision: Decision, windowMs: number, key = ''): Record<string, string> {
  const report: LimitReport = {
    name: 'default',
    limit: decision.limit,
    windowMs,
    remaining: decision.remaining,
    resetAt: decision.resetAt,
    allowed: decision.allowed,
    retryAfter: decision.retryAfter,
    partitionKey: key,
  };
  return Object.fromEntries(rateLimitHeaders([report], 'both', decision.now));
}

/**
 * One report per limit that applied to a check. Unlimited and unmatched descriptors have no limit;
 * a shadow-mode or quota-mode limit that was exceeded did not deny, so it is left out rather than
 * shown at 0.
 * A denied limit's wait is its `retryAfter`, when the same request would pass (a token bucket's
 * next token), not its `durationUntilReset`, when the limit is whole again: Retry-After is the
 * former rounded up to whole seconds on every path (middleware, `/v1/check`, `/json`, gRPC, gateway).
 */
export function checkReports(result: CheckResult): LimitReport[] {
  const { now } = result;
  const reports: LimitReport[] = [];
  result.statuses.forEach((status, index) => {
    if (status.list === 'deny') return void reports.push(deniedByList(status, now));
    const limit = status.currentLimit;
    if (limit === undefined || status.shadowOverLimit === true || status.quotaOverLimit === true) return;
    const denied = status.code === 'OVER_LIMIT';
    reports.push({
      name: limit.name ?? status.rule ?? `descriptor-${index}`,
      limit: limit.requestsPerUnit,
      windowMs: ruleWindowMs(limit.unit, limit.unitMultiplier),
      remaining: status.limitRemaining,
      resetAt: now + status.durationUntilReset,
      allowed: !denied,
      retryAfter: denied ? Math.max(1, status.retryAfter ?? status.durationUntilReset) : 0,
      partitionKey: status.key ?? status.rule ?? '',
    });
  });
  return reports;
}

/**
 * A refusal by a domain's deny list (rules/lists.ts) as a limit of 0: refused on every path (the
 * middleware passes a request without reports), `Retry-After: 1` as any refusal without a limit
 * (no wait helps until the list changes; a retry costs no store call).
 */
function deniedByList(status: DescriptorStatus, now: number): LimitReport {
  const rule = status.rule ?? 'deny-list';
  return { name: rule, limit: 0, windowMs: 1_000, remaining: 0, resetAt: now + 1_000, allowed: false, retryAfter: 1_000, partitionKey: rule };
}

/**
 * The header saying a check was refused by a block: a penalty (`block_duration`) or a block set by
 * hand. Its value is the whole seconds, rounded up, until the longest of those blocks lets the
 * request through (its statuses' `retryAfter`). envoy's RateLimitResponse has no field for it, so
 * the service sends it in `response_headers_to_add` on every transport, whatever `--response-headers` says.
 */
export const BLOCKED_HEADER = 'tollgate-blocked';

/** The {@link BLOCKED_HEADER} value of `result`, or undefined when no block refused it. */
export function blockedHeaderValue(result: CheckResult): string | undefined {
  if (result.overallCode !== 'OVER_LIMIT') return undefined;
  let wait = -1;
  for (const status of result.statuses) {
    if (status.blocked !== true || status.code !== 'OVER_LIMIT' || status.quotaOverLimit === true) continue;
    wait = Math.max(wait, status.retryAfter ?? status.durationUntilReset);
  }
  return wait < 0 ? undefined : String(Math.max(1, Math.ceil(wait / 1000)));
}

/** Headers for a check (`/json`, `/v1/check`, gRPC `response_headers_to_add`), relative to the check's instant. */
export function checkHeaders(result: CheckResult): Record<string, string> {
  const blocked = blockedHeaderValue(result);
  const reports = checkReports(result);
  if (reports.length === 0) {
    // Denied without a limit (a blocked key): only when to come back.
    if (result.overallCode !== 'OVER_LIMIT') return {};
    const wait = String(Math.max(1, Math.ceil(Math.max(...result.statuses.map((status) => status.retryAfter ?? status.durationUntilReset)) / 1000)));
    return { 'retry-after': wait, 'x-ratelimit-retry-after': wait, ...(blocked !== undefined ? { [BLOCKED_HEADER]: blocked } : {}) };
  }
  const headers = Object.fromEntries(rateLimitHeaders(reports, 'both', result.now));
  if (blocked !== undefined) headers[BLOCKED_HEADER] = blocked;
  return headers;
}
