/**
 * The rate-limit headers of a decision (DESIGN.md): `X-RateLimit-Limit`, `X-RateLimit-Remaining`,
 * `X-RateLimit-Reset` (epoch seconds), and when throttled `Retry-After` / `X-RateLimit-Retry-After`
 * (seconds, rounded up), plus the IETF `RateLimit-Policy` / `RateLimit` fields.
 */
import type { Decision } from '../decision.js';
import type { CheckResult } from '../rules/check.js';
import { UNIT_SECONDS } from '../rules/ruleset.js';

/** Headers for one decision. `windowMs` names the policy's window in `RateLimit-Policy`. */
export function decisionHeaders(decision: Decision, now: number, windowMs: number): Record<string, string> {
  const resetSeconds = Math.max(0, Math.ceil((decision.resetAt - now) / 1000));
  const headers: Record<string, string> = {
    'x-ratelimit-limit': String(decision.limit),
    'x-ratelimit-remaining': String(decision.remaining),
    'x-ratelimit-reset': String(Math.ceil(decision.resetAt / 1000)),
    'ratelimit-policy': `${decision.limit};w=${Math.ceil(windowMs / 1000)}`,
    ratelimit: `limit=${decision.limit}, remaining=${decision.remaining}, reset=${resetSeconds}`,
  };
  if (!decision.allowed) {
    const retrySeconds = String(Math.max(1, Math.ceil(decision.retryAfter / 1000)));
    headers['retry-after'] = retrySeconds;
    headers['x-ratelimit-retry-after'] = retrySeconds;
  }
  return headers;
}


/**
 * Headers for a check: `X-RateLimit-*` from the most restrictive limit (the fewest remaining),
 * and `RateLimit-Policy` listing every matched limit, not only the closest one.
 */
export function checkHeaders(result: CheckResult, now: number): Record<string, string> {
  const limited = result.statuses.filter((status) => status.currentLimit !== undefined);
  if (limited.length === 0) {
    // Denied without a limit (a blocked key): only when to come back.
    if (result.overallCode !== 'OVER_LIMIT') return {};
    const wait = String(Math.max(1, Math.ceil(Math.max(...result.statuses.map((status) => status.durationUntilReset)) / 1000)));
    return { 'retry-after': wait, 'x-ratelimit-retry-after': wait };
  }
  const tightest = limited.reduce((a, b) => (b.code === 'OVER_LIMIT' && a.code !== 'OVER_LIMIT') || b.limitRemaining < a.limitRemaining ? b : a);
  const resetSeconds = Math.ceil(tightest.durationUntilReset / 1000);
  const headers: Record<string, string> = {
    'x-ratelimit-limit': String(tightest.currentLimit!.requestsPerUnit),
    'x-ratelimit-remaining': String(tightest.limitRemaining),
    'x-ratelimit-reset': String(Math.ceil((now + tightest.durationUntilReset) / 1000)),
    'ratelimit-policy': limited
      .map((status) => {
        const limit = status.currentLimit!;
        const window = UNIT_SECONDS[limit.unit] * limit.unitMultiplier;
        return `${limit.requestsPerUnit};w=${window}${limit.name !== undefined ? `;name="${limit.name.replace(/"/g, '')}"` : ''}`;
      })
      .join(', '),
    ratelimit: `limit=${tightest.currentLimit!.requestsPerUnit}, remaining=${tightest.limitRemaining}, reset=${resetSeconds}`,
  };
  if (result.overallCode === 'OVER_LIMIT') {
    headers['retry-after'] = String(Math.max(1, resetSeconds));
    headers['x-ratelimit-retry-after'] = headers['retry-after']!;
  }
  return headers;
}
