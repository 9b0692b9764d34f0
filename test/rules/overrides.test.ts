/**
 * Per-tenant overrides through the rules holder (one process, the memory store): an override
 * outranks the rule it shadows, says so in the dump, stops applying at its expiry (a controlled
 * clock), and bad overrides are refused with a message naming what to fix.
 */
import { describe, expect, it } from 'vitest';
import { RulesError, createLimiter, memoryStore } from '../../src/index.js';
import { RulesHolder, compileRules, parseRules } from '../../src/rules/index.js';
import { MAX_OVERRIDES } from '../../src/rules/overrides.js';

const RULES = `domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: plan
    value: gold
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 5 }
`;
const acme = (limit: number, expires?: string) => ({
  domain: 'api',
  descriptors: [{ key: 'user', value: 'acme', rate_limit: { unit: 'minute', requests_per_unit: limit } }],
  ...(expires !== undefined ? { expires } : {}),
});

function setup() {
  let now = Date.UTC(2026, 10, 29, 12, 0, 0);
  const holder = new RulesHolder(compileRules(parseRules(RULES, 'rules.yaml')), { clock: () => now });
  const limiter = createLimiter({ store: memoryStore(), rules: holder, clock: () => now });
  const admitted = async (user: string, hits: number) => {
    let ok = 0;
    for (let i = 0; i < hits; i++) {
      const result = await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: user }] }] });
      if (result.overallCode === 'OK') ok += 1;
    }
    return ok;
  };
  return { holder, admitted, advance: (ms: number) => (now += ms), now: () => now };
}

describe('overrides through the rules holder', () => {
  it('an override outranks the rule it shadows for its tenant only, and the dump says so', async () => {
    const { holder, admitted } = setup();
    const [put] = holder.putOverride(acme(10));
    expect(put).toMatchObject({ id: 'api|user=acme', shadows: 'api.user', expires: null, rateLimit: { unit: 'minute', requestsPerUnit: 10 } });
    expect(await admitted('acme', 12)).toBe(10);
    expect(await admitted('other', 5)).toBe(2);
    expect(holder.current.dump()).toContain('api.user_acme: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm: fixed-window, override_of: api.user');
    // A deeper path keeps the rules below the node it copies.
    holder.putOverride({ domain: 'api', descriptors: [{ key: 'plan', value: 'gold', descriptors: [{ key: 'user', value: 'acme', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] }] });
    expect(holder.overrides().map((o) => [o.id, o.shadows])).toEqual([['api|plan=gold|user=acme', 'api.plan=gold.user'], ['api|user=acme', 'api.user']]);
    expect(holder.deleteOverride('api', [{ key: 'user', value: 'acme' }])).toBe(true);
    expect(holder.deleteOverride('api', [{ key: 'user', value: 'acme' }])).toBe(false);
    expect(await admitted('acme', 3)).toBe(0); // back under the rule's 2 a minute, already spent
    expect(holder.deleteOverrides('api')).toBe(1);
    expect(holder.overrides()).toEqual([]);
  });

  it('an override stops applying at its expiry, to the millisecond, and is removed', async () => {
    const { holder, admitted, advance, now } = setup();
    const [put] = holder.putOverride(acme(100, '30s'));
    expect(put!.expires).toBe(new Date(now() + 30_000).toISOString());
    expect(await admitted('acme', 5)).toBe(5);
    advance(29_999);
    expect(holder.overrides()).toHaveLength(1);
    advance(1);
    expect(await admitted('acme', 5)).toBe(0); // the rule's 2 a minute, spent already in this minute
    expect(holder.overrides()).toEqual([]);
    // An absolute time.
    holder.putOverride(acme(100, new Date(now() + 1_000).toISOString()));
    expect(holder.current.dump()).toContain('override_of');
    advance(1_000);
    expect(holder.current.dump()).not.toContain('override_of');
  });

  it('refuses bad overrides with a message naming the fix, changing nothing', () => {
    const { holder } = setup();
    const refused = (input: unknown) => {
      try {
        holder.putOverride(input as never);
      } catch (error) {
        expect(error).toBeInstanceOf(RulesError);
        return (error as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused({ ...acme(1), domain: 'nope' })).toMatch(/unknown domain "nope"; the rules have api/);
    expect(refused({ domain: 'api', descriptors: [{ key: 'team', value: 'x', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] })).toMatch(/no rule of domain api matches the path api\|team=x/);
    expect(refused({ domain: 'api', descriptors: [{ key: 'user', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] })).toMatch(/descriptors\[0\]\.value: an override is for one value/);
    expect(refused({ domain: 'api', descriptors: [{ key: 'user', value: 'a*', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] })).toMatch(/without "\*"/);
    expect(refused({ domain: 'api', descriptors: [{ key: 'user', value: 'acme' }] })).toMatch(/needs its rate_limit/);
    expect(refused({ domain: 'api', descriptors: [{ key: 'user', value: 'acme', rate_limit: { unit: 'fortnight', requests_per_unit: 1 } }] })).toMatch(/rate_limit\.unit/);
    expect(refused(acme(1, 'soon'))).toMatch(/expires: a duration like/);
    expect(refused(acme(1, '2020-01-01T00:00:00Z'))).toMatch(/already past/);
    expect(refused({ ...acme(1), extra: 1 })).toMatch(/extra: unknown field/);
    expect(refused([acme(1), acme(2)])).toMatch(/given twice/);
    expect(holder.overrides()).toEqual([]);
  });

  it(`holds at most ${MAX_OVERRIDES} overrides`, () => {
    const { holder } = setup();
    for (let batch = 0; batch < MAX_OVERRIDES / 100; batch++) {
      holder.putOverride(Array.from({ length: 100 }, (_, i) => ({ ...acme(3), descriptors: [{ key: 'user', value: `t${batch}-${i}`, rate_limit: { unit: 'minute', requests_per_unit: 3 } }] })));
    }
    expect(() => holder.putOverride(acme(1))).toThrow(/at most 1000 are held: delete some first/);
    expect(holder.overrides()).toHaveLength(MAX_OVERRIDES);
  });

  it('an override keeps what else the domain says: its deny list and a descriptor\'s concurrency limit', async () => {
    const text = `domain: api
deny:
  - key: user
    values: [mallory]
descriptors:
  - key: user
    concurrency: { limit: 1, ttl: 30s }
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;
    const holder = new RulesHolder(compileRules(parseRules(text, 'rules.yaml')));
    const limiter = createLimiter({ store: memoryStore(), rules: holder });
    holder.putOverride({ domain: 'api', descriptors: [{ key: 'user', value: 'mallory', rate_limit: { unit: 'minute', requests_per_unit: 100 } }] });
    holder.putOverride(acme(100));
    const check = (user: string) => limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: user }] }] });
    expect((await check('mallory')).overallCode).toBe('OVER_LIMIT');
    expect((await check('acme')).overallCode).toBe('OK');
    // The override's copy of the descriptor still holds its concurrency limit of 1.
    const request = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'acme' }] }] };
    expect((await limiter.acquireCheck(request)).allowed).toBe(true);
    expect((await limiter.acquireCheck(request)).allowed).toBe(false);
    await limiter.close();
  });
});
