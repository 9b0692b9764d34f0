/**
 * Issue 27, item 1: one `/v1/limit` request with a window past 2^53 ms (`window: 1e300`) reached
 * Redis, whose script refused the argument; the guard counted that as an outage, so legitimate
 * checks came back degraded (429 with `--failure-mode closed`) and /readyz went 503. Every entry
 * point now holds a policy to the engine's ranges (POLICY_RANGES: window and capacity at most
 * 2^53 − 1) before anything reaches a store, and an argument the script refuses anyway is the
 * caller's error (InvalidPolicyError), never the store's health.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompiledPolicy, compilePolicy } from '../../src/policy.js';
import { createLimiter, memoryStore, redisStore, InvalidPolicyError, RulesError, type Decision } from '../../src/index.js';
import { parseRules } from '../../src/rules/index.js';
import { useRedisServer } from '../support/redis-topologies.js';
import { startServiceProcess, type ServiceProcess } from '../support/service.js';

/** Policies past the engine's ranges: each was accepted before, and each made the Redis script refuse its arguments. */
const ATTACKS: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
  ['fixed-window, window 1e300', { algorithm: 'fixed-window', limit: 5, window: 1e300 }, 'window'],
  ['fixed-window, window 2^53', { algorithm: 'fixed-window', limit: 5, window: 2 ** 53 }, 'window'],
  ['sliding-log, window 2^60', { algorithm: 'sliding-log', limit: 5, window: 2 ** 60 }, 'window'],
  ['fixed-window, a capacity past 2^53 through softPercent', { algorithm: 'fixed-window', limit: Number.MAX_SAFE_INTEGER, window: 1000, softPercent: 1000 }, 'softPercent'],
];

/** The legitimate caller: 1000 an hour from its first hit, so every answer's `remaining` is known. */
const VICTIM_POLICY = { algorithm: 'fixed-window', limit: 1000, window: '1h', windowStart: 'first-hit' } as const;
const ROUNDS = 40;

interface Answer {
  readonly status: number;
  readonly degraded: string | null;
  readonly body: Record<string, unknown>;
}

async function limit(service: ServiceProcess, body: unknown): Promise<Answer> {
  const response = await fetch(service.url('/v1/limit'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, degraded: response.headers.get('tollgate-degraded'), body: (await response.json()) as Record<string, unknown> };
}

async function readyz(service: ServiceProcess): Promise<number> {
  return (await fetch(service.url('/readyz'))).status;
}

const redis = useRedisServer();

describe('a policy past the engine\'s ranges at POST /v1/limit of tollgate serve --redis --failure-mode closed', () => {  let service: ServiceProcess;
  beforeAll(async () => {
    // A generous deadline: on a loaded machine a slow answer must not pass for the attack's effect.
    service = await startServiceProcess(['--redis', redis.url, '--failure-mode', 'closed', '--deadline-ms', '2000']);
  }, 20_000);
  afterAll(async () => {
    expect(await service?.stop()).toBe(0);
  });

  it('is a 400 naming the field; a burst of them leaves every legitimate check exact and /readyz 200', async () => {
    const victims: Answer[] = [];
    const attacks: Answer[] = [];
    const ready: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const [, policy] = ATTACKS[round % ATTACKS.length]!;
      // Sent together, so the two can share one Redis batch.
      const [attack, victim] = await Promise.all([limit(service, { key: `attacker:${round}`, policy }), limit(service, { key: 'victim', policy: VICTIM_POLICY })]);
      attacks.push(attack);
      victims.push(victim);
      if (round % 5 === 4) ready.push(await readyz(service));
    }
    const degraded = victims.filter((answer, i) => answer.status !== 200 || answer.degraded !== null || answer.body.remaining !== VICTIM_POLICY.limit - 1 - i);
    const reasons = [...new Set(degraded.map((answer) => answer.degraded ?? answer.status))].join(', ');
    expect(`${degraded.length} of ${ROUNDS} legitimate checks degraded or inexact (${reasons})`).toBe(`0 of ${ROUNDS} legitimate checks degraded or inexact ()`);
    expect(ready.filter((status) => status !== 200)).toEqual([]);
    for (const [i, answer] of attacks.entries()) {
      const [, , field] = ATTACKS[i % ATTACKS.length]!;
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ error: 'bad_request', code: 'ERR_TOLLGATE_INVALID_POLICY' });
      expect(String(answer.body.message)).toContain(field);
    }
  });
});

describe('the engine\'s ranges at every other entry point', () => {
  it.each(ATTACKS)('compilePolicy and a limiter on the memory store refuse %s, naming the field', async (_name, policy, field) => {
    expect(() => compilePolicy(policy as never)).toThrow(InvalidPolicyError);
    expect(() => compilePolicy(policy as never)).toThrow(expect.objectContaining({ field }));
    const limiter = createLimiter({ store: memoryStore() });
    await expect(limiter.limit('k', policy as never)).rejects.toThrow(InvalidPolicyError);
  });

  it('the longest window counted exactly, 2^53 − 1 ms, is still accepted', () => {
    expect(compilePolicy({ algorithm: 'fixed-window', limit: 5, window: Number.MAX_SAFE_INTEGER }).windowMs).toBe(Number.MAX_SAFE_INTEGER);
    expect(compilePolicy({ algorithm: 'sliding-log', limit: 5, window: Number.MAX_SAFE_INTEGER }).windowMs).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('the rules loader refuses a unit_multiplier whose window passes 2^53 − 1 ms, at the unit_multiplier', () => {
    const text = ['domain: api', 'descriptors:', '  - key: user', '    rate_limit: { unit: year, requests_per_unit: 5, unit_multiplier: 1000000000 }', ''].join('\n');
    expect(() => parseRules(text, 'api.yaml')).toThrow(RulesError);
    expect(() => parseRules(text, 'api.yaml')).toThrow(/api\.yaml:4:\d+: descriptors\[0\]\.rate_limit\.unit_multiplier: .*9007199254740991 ms/);
  });
});

describe('an argument the Redis script refuses is the caller\'s error, not an outage', () => {
  it('rejects the caller with InvalidPolicyError; its batch-mates are decided; the breaker stays closed', async () => {
    const store = redisStore({ url: redis.url });
    redis.stores.push(store);
    await store.ready();
    // A generous deadline: on a loaded machine a slow answer must not be taken for the refusal.
    const limiter = createLimiter({ store, failureMode: 'closed', deadlineMs: 5000 });
    // A compiled policy forged past the checks (its constructor is internal): only Redis can refuse it.
    const valid = compilePolicy({ algorithm: 'fixed-window', limit: 5, window: 1000 });
    const forged = new CompiledPolicy({ ...valid, windowMs: 2 ** 60 });
    const policy = { algorithm: 'sliding-log', limit: 100, window: '1h' } as const;
    for (let i = 0; i < 20; i++) {
      const [bad, good] = await Promise.allSettled([limiter.limit(`forged:${i}`, forged), limiter.limit('batch-mate', policy)]);
      expect(bad.status).toBe('rejected');
      expect((bad as PromiseRejectedResult).reason).toBeInstanceOf(InvalidPolicyError);
      expect((bad as PromiseRejectedResult).reason.message).toMatch(/Redis refused/);
      expect((good as PromiseFulfilledResult<Decision>).value).toMatchObject({ allowed: true, remaining: 99 - i });
      expect((good as PromiseFulfilledResult<Decision>).value.reason).toBeUndefined();
    }
    // The longest window counted exactly is decided on Redis, alone (the lean script) and in a batch.
    const longest = [
      { algorithm: 'fixed-window', limit: 5, window: Number.MAX_SAFE_INTEGER },
      { algorithm: 'fixed-window', limit: 5, window: Number.MAX_SAFE_INTEGER, windowStart: 'first-hit' },
      { algorithm: 'sliding-log', limit: 5, window: Number.MAX_SAFE_INTEGER },
    ] as const;
    for (const [i, policy] of longest.entries()) expect(await limiter.limit(`longest:${i}`, policy)).toMatchObject({ allowed: true, remaining: 4 });
    const batch = await Promise.all(longest.map((policy, i) => limiter.limit(`longest:${i}`, policy)));
    expect(batch.map((decision) => [decision.remaining, decision.reason])).toEqual(longest.map(() => [3, undefined]));
    // A lone call (the lean script) too.
    await expect(limiter.limit('forged:alone', forged)).rejects.toThrow(InvalidPolicyError);
    const health = limiter.health();
    expect(health.breaker).toBe('closed');
    expect(health.fallbacks.error).toBe(0);
    await limiter.close();
  });
});
