/**
 * Concurrency limits in rules: `concurrency: { limit, ttl }` on a descriptor is parsed with the
 * limiter's bounds (problems at line:col), and `acquireCheck` / `releaseCheck` take and free one
 * slot per descriptor that reaches such a limit, all or nothing, under one permit id.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, RulesError, type Limiter } from '../../src/index.js';
import { compileRules, parseRules } from '../../src/rules/index.js';

const RULES = `
domain: api
descriptors:
  - key: user
    concurrency: { limit: 2, ttl: 30s }
  - key: tenant
    concurrency:
      limit: 3
      ttl: 60000
    descriptors:
      - key: route
        value: /export
        concurrency: { limit: 1, ttl: 5m }
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;

const at = (...pairs: [string, string][]) => ({ entries: pairs.map(([key, value]) => ({ key, value })) });
const limiter = (): Limiter => createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(RULES, 'api.yaml')) });

describe('concurrency in rules', () => {
  it('parses concurrency on a descriptor, with or without a rate limit', () => {
    const [domain] = parseRules(RULES, 'api.yaml');
    expect(domain!.descriptors.map((d) => d.concurrency)).toEqual([{ limit: 2, ttlMs: 30_000 }, { limit: 3, ttlMs: 60_000 }, undefined]);
    expect(domain!.descriptors[1]!.descriptors[0]!.concurrency).toEqual({ limit: 1, ttlMs: 300_000 });
  });

  it.each([
    ['concurrency: { limit: 0, ttl: 1s }', /limit must be a whole number from 1 to 100000/],
    ['concurrency: { limit: 2 }', /missing ttl/],
    ['concurrency: { ttl: 1s }', /missing limit/],
    ['concurrency: { limit: 2, ttl: soon }', /not a duration/],
    ['concurrency: { limit: 2, ttl: 2d }', /at most 1d/],
    ['concurrency: { limit: 2, ttl: 1s, burst: 3 }', /burst/],
    ['concurrency: 5', /a mapping/],
  ])('refuses %s at its line', (line, message) => {
    const text = `domain: d\ndescriptors:\n  - key: k\n    ${line}\n`;
    expect(() => parseRules(text, 'd.yaml')).toThrow(RulesError);
    expect(() => parseRules(text, 'd.yaml')).toThrow(message);
    expect(() => parseRules(text, 'd.yaml')).toThrow(/d\.yaml:4:/);
  });

  it('takes a slot per descriptor with a concurrency limit; none for the others', async () => {
    const slots = limiter();
    const request = { domain: 'api', descriptors: [at(['user', 'u1']), at(['remote_address', '1.2.3.4']), at(['tenant', 't1'], ['route', '/export'])] };
    const first = await slots.acquireCheck(request);
    expect(first.allowed).toBe(true);
    expect(first.statuses.map((s) => s && [s.allowed, s.held, s.limit, s.rule])).toEqual([[true, 1, 2, 'api.user'], null, [true, 1, 1, 'api.tenant.route=/export']]);
    // The export route of t1 is full; another tenant's is not.
    const second = await slots.acquireCheck(request);
    expect([second.allowed, second.statuses[2]!.allowed]).toEqual([false, false]);
    expect(second.retryAfter).toBeGreaterThan(290_000);
    expect(second.retryAfter).toBeLessThanOrEqual(300_000);
    expect((await slots.acquireCheck({ domain: 'api', descriptors: [at(['tenant', 't2'], ['route', '/export'])] })).allowed).toBe(true);
    expect(await slots.releaseCheck(request, first.id)).toBe(2);
    expect(await slots.releaseCheck(request, first.id)).toBe(0);
    expect((await slots.acquireCheck(request)).allowed).toBe(true);
  });

  it('all or nothing: a refused descriptor releases the slots taken for the others', async () => {
    const slots = limiter();
    expect((await slots.acquireCheck({ domain: 'api', descriptors: [at(['tenant', 't1'], ['route', '/export'])] })).allowed).toBe(true);
    const refused = await slots.acquireCheck({ domain: 'api', descriptors: [at(['user', 'u1']), at(['tenant', 't1'], ['route', '/export'])] });
    expect([refused.allowed, refused.statuses[0]!.allowed]).toEqual([false, true]);
    // u1's slot was given back: two are free.
    for (let i = 0; i < 2; i++) expect((await slots.acquireCheck({ domain: 'api', descriptors: [at(['user', 'u1'])] })).allowed).toBe(true);
    expect((await slots.acquireCheck({ domain: 'api', descriptors: [at(['user', 'u1'])] })).allowed).toBe(false);
  });

  it('an unknown domain or a descriptor without a concurrency limit takes nothing and refuses nothing', async () => {
    const slots = limiter();
    expect(await slots.acquireCheck({ domain: 'nope', descriptors: [at(['user', 'u1'])] })).toMatchObject({ allowed: true, statuses: [null] });
    await expect(slots.acquireCheck({ domain: '', descriptors: [] })).rejects.toThrow(/domain must be a non-empty string/);
    await expect(slots.releaseCheck({ domain: 'api', descriptors: [] }, 'bad id')).rejects.toThrow(/permit id/);
  });
});
