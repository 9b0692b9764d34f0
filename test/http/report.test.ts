/** The 429 body's content negotiation and the header arithmetic, on their own. */
import { describe, expect, it } from 'vitest';
import { bindingReport, limitedBody, prefersProblem, rateLimitHeaders, retryAfterSeconds, type LimitReport } from '../../src/http/report.js';

const report = (fields: Partial<LimitReport>): LimitReport => ({
  name: 'p',
  limit: 10,
  windowMs: 60_000,
  remaining: 5,
  resetAt: 1_000_000,
  allowed: true,
  retryAfter: 0,
  partitionKey: 'k',
  ...fields,
});

describe('Accept negotiation for the 429 body', () => {
  it.each([
    ['application/problem+json', true],
    ['application/json, application/problem+json', true],
    ['application/problem+json;q=0', false],
    ['application/problem+json;q=0.5, application/json', false],
    ['application/json;q=0.5, application/problem+json', true],
    ['application/json', false],
    ['*/*', false],
    ['text/html, application/problem+json;q=0.1', true],
    ['application/problem+json;q=abc', false],
  ])('%s → problem: %s', (accept, expected) => {
    expect(prefersProblem(accept)).toBe(expected);
    expect(limitedBody([report({ allowed: false, retryAfter: 1 })], undefined, accept).contentType.startsWith('application/problem+json')).toBe(expected);
  });
});

describe('headers over several reports', () => {
  it('X-RateLimit-* follow a denying report first, then the fewest remaining, then the later reset', () => {
    const a = report({ name: 'a', remaining: 3, resetAt: 2000 });
    const b = report({ name: 'b', remaining: 3, resetAt: 5000 });
    const c = report({ name: 'c', remaining: 0, allowed: false, retryAfter: 1500 });
    const d = report({ name: 'd', remaining: 0, allowed: false, retryAfter: 9000 });
    expect(bindingReport([a, b]).name).toBe('b');
    expect(bindingReport([a, c, b]).name).toBe('c');
    expect(bindingReport([c, d]).name).toBe('d');
    expect(retryAfterSeconds([a, c, d])).toBe(9);
    expect(retryAfterSeconds([report({ allowed: false, retryAfter: 1 })])).toBe(1);
    expect(retryAfterSeconds([report({ allowed: false, retryAfter: 1001 })])).toBe(2);
  });

  it('never sends a reset in the past or a negative t', () => {
    const stale = report({ resetAt: 500 });
    const headers = Object.fromEntries(rateLimitHeaders([stale], 'both', 10_000));
    expect(Number(headers['x-ratelimit-reset'])).toBe(10);
    expect(headers.ratelimit).toMatch(/;t=0;/);
  });

  it('escapes policy names into valid structured-field strings', () => {
    const headers = Object.fromEntries(rateLimitHeaders([report({ name: 'a "quoted" \\ näme' })], 'ietf', 0));
    expect(headers['ratelimit-policy']).toMatch(/^"a \\"quoted\\" \\\\ n\?me";q=10;w=60;pk=:[A-Za-z0-9+/]{16}:$/);
    expect(headers['x-ratelimit-limit']).toBeUndefined();
  });
});
