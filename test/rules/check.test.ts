/**
 * Matching and check(), envoy semantics, as tables: rules in YAML (parsed by the real loader),
 * requests in, statuses out, on the memory store with a controlled clock.
 */
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse/index.js';
import { InvalidCheckError, InvalidOptionError, createLimiter, memoryStore, type Limiter } from '../../src/index.js';
import type { CheckRequest } from '../../src/rules/check.js';

const NOW = 1_700_000_000_000;

const RULES = `
domain: api
descriptors:
  # Default per remote address, with a stricter limit for one path under it.
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3 }
    descriptors:
      - key: path
        value: /login
        rate_limit: { unit: minute, requests_per_unit: 1 }
  # Specific value beats the key-only default.
  - key: user
    value: vip
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  # Wildcards: one counter per value, or one shared counter with share_threshold.
  - key: client
    value: mobile-*
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: region
    value: eu-*-1
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  # replaces: the premium limit replaces the generic one when both match.
  - key: plan
    value: premium
    rate_limit: { unit: minute, requests_per_unit: 10, name: premium, replaces: [{ name: generic }] }
  - key: tier
    rate_limit: { unit: minute, requests_per_unit: 1, name: generic }
  # Shadow mode: counted and reported, never denies. Unlimited: never limited, never stored.
  - key: experiment
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: internal
    rate_limit: { unlimited: true }
  # A node without a limit of its own, and a costly limit with Tollgate's additions.
  - key: tenant
    descriptors:
      - key: op
        value: export
        rate_limit: { unit: hour, unit_multiplier: 3, requests_per_unit: 300, algorithm: token-bucket, cost: 100 }
`;

function setup(): Limiter {
  return createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(RULES, 'rules.yaml')) });
}

function request(...descriptors: [string, string][][]): CheckRequest {
  return { domain: 'api', descriptors: descriptors.map((entries) => ({ entries: entries.map(([key, value]) => ({ key, value })) })), now: NOW };
}

/** Runs `times` checks, returns the codes of the last one. */
async function codes(limiter: Limiter, checkRequest: CheckRequest, times = 1): Promise<string[]> {
  let result;
  for (let i = 0; i < times; i++) result = await limiter.check(checkRequest);
  return result!.statuses.map((status) => status.code);
}

describe('matching (envoy semantics)', () => {
  const table: [string, CheckRequest, number, string[], (string | undefined)[]][] = [
    // name, request, times, codes of the last check, rule path reached per descriptor
    ['key-only default, one counter per value', request([['remote_address', '10.0.0.1']]), 4, ['OVER_LIMIT'], ['api.remote_address']],
    ['nested specific value under a default', request([['remote_address', '10.0.0.2'], ['path', '/login']]), 2, ['OVER_LIMIT'], ['api.remote_address.path=/login']],
    ['nested value that has no rule: no limit', request([['remote_address', '10.0.0.3'], ['path', '/other']]), 5, ['OK'], [undefined]],
    ['specific value beats the default', request([['user', 'vip']]), 5, ['OK'], ['api.user=vip']],
    ['other values fall back to the default', request([['user', 'bob']]), 3, ['OVER_LIMIT'], ['api.user']],
    ['wildcard value', request([['client', 'mobile-ios']]), 3, ['OVER_LIMIT'], ['api.client=mobile-*']],
    ['wildcard not matching: no limit', request([['client', 'desktop']]), 5, ['OK'], [undefined]],
    ['* inside a value', request([['region', 'eu-west-1']]), 3, ['OVER_LIMIT'], ['api.region=eu-*-1']],
    ['more entries than the tree: no limit', request([['user', 'bob'], ['extra', 'x']]), 5, ['OK'], [undefined]],
    ['node without a limit of its own: no limit', request([['tenant', 't1']]), 5, ['OK'], [undefined]],
    ['unknown key: no limit', request([['nobody', 'x']]), 5, ['OK'], [undefined]],
    ['shadow mode never denies', request([['experiment', 'a']]), 3, ['OK'], ['api.experiment']],
    ['unlimited is never limited', request([['internal', 'batch']]), 5, ['OK'], ['api.internal']],
    ['replaces drops the replaced limit', request([['plan', 'premium']], [['tier', 'gold']]), 3, ['OK', 'OK'], ['api.plan=premium', undefined]],
    ['without its replacement the generic limit applies', request([['tier', 'silver']]), 2, ['OVER_LIMIT'], ['api.tier']],
  ];

  it.each(table)('%s', async (_name, checkRequest, times, expected, paths) => {
    const limiter = setup();
    expect(await codes(limiter, checkRequest, times)).toEqual(expected);
    const result = await limiter.check(checkRequest);
    expect(result.statuses.map((status) => status.rule)).toEqual(paths);
  });

  it('key-only defaults count each value apart; share_threshold wildcards share one counter', async () => {
    const limiter = setup();
    expect(await codes(limiter, request([['remote_address', 'a']]), 3)).toEqual(['OK']);
    expect(await codes(limiter, request([['remote_address', 'b']]))).toEqual(['OK']);
    expect(await codes(limiter, request([['client', 'mobile-a']]), 2)).toEqual(['OK']);
    expect(await codes(limiter, request([['client', 'mobile-b']]))).toEqual(['OK']);
    await codes(limiter, request([['region', 'eu-west-1']]), 2);
    expect(await codes(limiter, request([['region', 'eu-north-1']]))).toEqual(['OVER_LIMIT']);
  });
});

describe('decideCheck() (the hot-path check)', () => {
  it('answers on the memory store without a promise, as check() answers the same sequence', async () => {
    const sync = setup();
    const viaPromise = setup();
    const checkRequest = request([['user', 'bob']], [['remote_address', '10.0.0.1'], ['path', '/login']]);
    for (let i = 0; i < 3; i++) {
      const decided = sync.decideCheck(checkRequest);
      expect(decided).not.toBeInstanceOf(Promise);
      expect(decided).toEqual(await viaPromise.check(checkRequest));
    }
    expect((sync.decideCheck(checkRequest) as { overallCode: string }).overallCode).toBe('OVER_LIMIT');
  });

  it('throws bad input at once, where check() rejects with the same error', async () => {
    const limiter = setup();
    const bad = { domain: '', descriptors: [] } as CheckRequest;
    expect(() => limiter.decideCheck(bad)).toThrow(InvalidCheckError);
    await expect(limiter.check(bad)).rejects.toThrow(InvalidCheckError);
    expect(() => createLimiter().decideCheck(request([['user', 'bob']]))).toThrow(InvalidOptionError);
  });
});

describe('check()', () => {
  it('reports envoy statuses: current limit, remaining, time until reset', async () => {
    const result = await setup().check(request([['user', 'bob']], [['nobody', 'x']]));
    expect(result).toEqual({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: { requestsPerUnit: 2, unit: 'minute', unitMultiplier: 1 },
          limitRemaining: 1,
          durationUntilReset: 40_000, // NOW is 20 s into its minute
          rule: 'api.user',
          key: 'api|user=bob',
        },
        { code: 'OK', limitRemaining: 0, durationUntilReset: 0 },
      ],
      now: NOW,
    });
  });

  it('is all-or-nothing: a request denied by one limit consumes nothing of the others', async () => {
    const limiter = setup();
    const both = request([['remote_address', '10.9.9.9']], [['user', 'carol']]);
    expect((await limiter.check(both)).overallCode).toBe('OK');
    expect((await limiter.check(both)).overallCode).toBe('OK');
    const denied = await limiter.check(both);
    expect(denied.overallCode).toBe('OVER_LIMIT');
    expect(denied.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT']);
    // remote_address (3/min) recorded only the two admitted requests.
    const alone = await limiter.check(request([['remote_address', '10.9.9.9']]));
    expect(alone.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
  });

  it('flags a shadow-mode limit that would have denied', async () => {
    const limiter = setup();
    await limiter.check(request([['experiment', 'b']]));
    const second = await limiter.check(request([['experiment', 'b']]));
    expect(second).toMatchObject({ overallCode: 'OK', statuses: [{ code: 'OK', shadowOverLimit: true }] });
  });

  it('applies hits, per-descriptor hitsAddend, and the rule cost; unit_multiplier sets the window', async () => {
    const limiter = setup();
    const exportOnce = { domain: 'api', descriptors: [{ entries: [{ key: 'tenant', value: 't' }, { key: 'op', value: 'export' }] }], now: NOW };
    const first = await limiter.check(exportOnce);
    expect(first.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 200, currentLimit: { requestsPerUnit: 300, unit: 'hour', unitMultiplier: 3 } });
    expect((await limiter.check({ ...exportOnce, hits: 2 })).statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
    expect((await limiter.check(exportOnce)).overallCode).toBe('OVER_LIMIT');
    const user = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'dave' }], hitsAddend: 2 }], hits: 1, now: NOW };
    expect((await limiter.check(user)).statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
  });

  it('an unknown domain or an empty descriptor list limits nothing', async () => {
    const limiter = setup();
    expect(await limiter.check({ domain: 'nope', descriptors: [{ entries: [{ key: 'user', value: 'x' }] }], now: NOW })).toEqual({
      overallCode: 'OK',
      statuses: [{ code: 'OK', limitRemaining: 0, durationUntilReset: 0 }],
      now: NOW,
    });
    expect(await limiter.check({ domain: 'api', descriptors: [], now: NOW })).toEqual({ overallCode: 'OK', statuses: [], now: NOW });
    expect(await limiter.check({ domain: 'api', descriptors: [{ entries: [] }] })).toMatchObject({ overallCode: 'OK' });
  });

  it('rejects malformed requests with a typed error, and needs rules', async () => {
    const limiter = setup();
    await expect(limiter.check({ domain: '', descriptors: [] })).rejects.toBeInstanceOf(InvalidCheckError);
    await expect(limiter.check({ domain: 'api', descriptors: 'x' } as never)).rejects.toThrow(/descriptors must be an array/);
    await expect(limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: '', value: 'v' }] }] })).rejects.toThrow(/entries\[0\] must be/);
    await expect(limiter.check({ domain: 'api', descriptors: [], hits: -1 })).rejects.toThrow(/hits must be a whole number/);
    await expect(createLimiter().check({ domain: 'api', descriptors: [] })).rejects.toBeInstanceOf(InvalidOptionError);
  });
});
