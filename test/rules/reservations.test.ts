/**
 * Reserve then settle through rules (`limiter.reserveCheck` / `settleCheck`), on the memory store,
 * a real Redis and a real Redis Cluster: every limit the descriptors match is reserved all or
 * nothing (a refused call gives back what it took on the others), a settle applies the actual cost
 * to every limit reserved under the id, once, and every bad input is refused before anything is
 * reserved.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidCheckError, InvalidCostError, InvalidOptionError, createLimiter, loadRules, memoryStore, type Limiter, type RuleSet, type Store } from '../../src/index.js';
import { useRedisTopologies } from '../support/redis-topologies.js';
import { RESERVATION_RULES, orgAndUser } from '../support/reservation-rules.js';

const redis = useRedisTopologies();
const NOW = 1_800_000_000_000;
let dir: string;
let rules: RuleSet;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-reserve-'));
  writeFileSync(join(dir, 'tokens.yaml'), RESERVATION_RULES);
  rules = await loadRules(dir);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

describe.each([
  ['memory store', async (): Promise<Store> => memoryStore({ sweepIntervalMs: 0 })],
  ['single Redis', (): Promise<Store> => redis.open({ url: redis.single.url })],
  ['Redis Cluster', (): Promise<Store> => redis.open({ cluster: redis.cluster.nodes })],
] as const)('reserveCheck and settleCheck on the %s', (_name, open) => {
  let limiter: Limiter;
  beforeAll(async () => {
    limiter = createLimiter({ store: await open(), rules, deadlineMs: 5_000 });
  });

  it('reserves on every matched limit all or nothing, gives back a refused call, settles every limit once', async () => {
    const org = unique('acme');
    const descriptors = orgAndUser(org, 'alice');
    const first = await limiter.reserveCheck({ domain: 'tokens', descriptors, cost: 20, id: 'a', now: NOW });
    expect(first).toMatchObject({ overallCode: 'OK', id: 'a', statuses: [{ code: 'OK', limitRemaining: 80, rule: 'tokens.org' }, { code: 'OK', limitRemaining: 10, rule: 'tokens.org.user' }] });
    // A retry of an admitted reserve counts once.
    expect((await limiter.reserveCheck({ domain: 'tokens', descriptors, cost: 20, id: 'a', now: NOW })).statuses.map((s) => s.limitRemaining)).toEqual([80, 10]);
    // The user's budget refuses 20 more: the org's reservation of this call is given back.
    const refused = await limiter.reserveCheck({ domain: 'tokens', descriptors, cost: 20, id: 'b', now: NOW });
    expect(refused).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OK', limitRemaining: 80 }, { code: 'OVER_LIMIT', limitRemaining: 0 }] });
    expect((await limiter.check({ domain: 'tokens', descriptors: [descriptors[0]!], hits: 1, now: NOW })).statuses[0]!.limitRemaining).toBe(79);
    // Settled at 5: 15 back on both limits, once.
    const settled = await limiter.settleCheck({ domain: 'tokens', descriptors, id: 'a', cost: 5, now: NOW });
    expect(settled.statuses).toMatchObject([
      { status: 'settled', reserved: 20, cost: 5, limitRemaining: 94, rule: 'tokens.org' },
      { status: 'settled', reserved: 20, cost: 5, limitRemaining: 25, rule: 'tokens.org.user' },
    ]);
    expect((await limiter.settleCheck({ domain: 'tokens', descriptors, id: 'a', cost: 0, now: NOW })).statuses.map((s) => s?.status)).toEqual(['repeated', 'repeated']);
    expect((await limiter.settleCheck({ domain: 'tokens', descriptors, id: 'never', cost: 0, now: NOW })).statuses.map((s) => s?.status)).toEqual(['unknown', 'unknown']);
  });

  it('a retry of a refused reserve with the same id is refused again and spends nothing, even once the refusing limit has room', async () => {
    const org = unique('acme');
    const descriptors = orgAndUser(org, 'alice');
    const call = { domain: 'tokens', descriptors, cost: 20, ttl: 7_200_000 };
    expect((await limiter.reserveCheck({ ...call, id: 'a', now: NOW })).overallCode).toBe('OK');
    // The user's budget (a token bucket of 30 an hour, 10 left) refuses 'b'; the org's 20 are given back.
    const refused = await limiter.reserveCheck({ ...call, id: 'b', now: NOW });
    expect(refused).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OK', limitRemaining: 80 }, { code: 'OVER_LIMIT' }] });
    expect(refused.spentId).toBeUndefined();
    // 45 minutes on, the bucket is full again (the org's hour still runs): the retry is refused all the same.
    const later = NOW + 2_700_000;
    for (const attempt of [1, 2]) {
      const retry = await limiter.reserveCheck({ ...call, id: 'b', now: later });
      expect(retry, `retry ${attempt}`).toMatchObject({ overallCode: 'OVER_LIMIT', id: 'b', statuses: [{ limitRemaining: 80 }, { limitRemaining: 30 }] });
      expect(retry.spentId, `retry ${attempt}`).toMatch(/"b" was given back by a refused reserve.*reserve with a new id/);
    }
    // Nothing was spent: a new id takes the 20 on both limits.
    const fresh = await limiter.reserveCheck({ ...call, id: 'c', now: later });
    expect(fresh).toMatchObject({ overallCode: 'OK', statuses: [{ code: 'OK', limitRemaining: 60 }, { code: 'OK', limitRemaining: 10 }] });
    expect(fresh.spentId).toBeUndefined();
    // Settled, 'c' is spent too: its retry is refused and spends nothing.
    await limiter.settleCheck({ domain: 'tokens', descriptors, id: 'c', cost: 20, now: later });
    const afterSettle = await limiter.reserveCheck({ ...call, id: 'c', now: later });
    expect(afterSettle).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ limitRemaining: 60 }, { limitRemaining: 10 }] });
    expect(afterSettle.spentId).toMatch(/reserve with a new id/);
  });

  it('limiter.reserve: a retry of a settled reservation answers its first decision and the settled cost', async () => {
    const key = unique('settled');
    const policy = { algorithm: 'token-bucket', limit: 10, window: '1m' } as const;
    const first = await limiter.reserve(key, policy, { cost: 4, id: 'r', now: NOW });
    expect(first).toMatchObject({ allowed: true, remaining: 6 });
    expect(first.settled).toBeUndefined();
    expect((await limiter.reserve(key, policy, { cost: 4, id: 'r', now: NOW + 1 })).settled).toBeUndefined();
    await limiter.settle(key, policy, { id: 'r', cost: 1, now: NOW + 2 });
    expect(await limiter.reserve(key, policy, { cost: 4, id: 'r', now: NOW + 3 })).toEqual({ ...first, settled: 1 });
  });

  it("counts the rule's cost per unit, and takes no reservation on unlimited or unmatched descriptors", async () => {
    const who = unique('d');
    const descriptors = [{ entries: [{ key: 'double', value: who }] }, { entries: [{ key: 'free', value: who }] }, { entries: [{ key: 'nothing', value: who }] }];
    const reserved = await limiter.reserveCheck({ domain: 'tokens', descriptors, cost: 10, id: 'x', now: NOW });
    expect(reserved.overallCode).toBe('OK');
    expect(reserved.statuses.map((s) => s.limitRemaining)).toEqual([30, 4_294_967_295, 0]);
    const settled = await limiter.settleCheck({ domain: 'tokens', descriptors, id: 'x', cost: 1, now: NOW });
    expect(settled.statuses).toEqual([expect.objectContaining({ status: 'settled', reserved: 20, cost: 2, limitRemaining: 48 }), null, null]);
  });
});

describe('reserveCheck and settleCheck refuse bad input before reserving anything', () => {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });

  it.each([
    ['a cost of 0', { cost: 0, id: 'a' }, InvalidCostError, /whole number ≥ 1/],
    ['no id', { cost: 1 }, InvalidOptionError, /id must be a string/],
    ['a ttl past a day', { cost: 1, id: 'a', ttl: 86_400_001 }, InvalidOptionError, /ttl/],
    ['a misspelt field', { cost: 1, id: 'a', tll: 5 }, InvalidCheckError, /unknown field "tll"/],
    ['a hitsAddend', { cost: 1, id: 'a', descriptors: [{ entries: [{ key: 'org', value: 'x' }], hitsAddend: 2 }] }, InvalidCheckError, /hitsAddend is not taken/],
    ['a descriptor reaching a shared capacity', { cost: 1, id: 'a', descriptors: [...orgAndUser('refused', 'u'), { entries: [{ key: 'shared', value: 'x' }] }] }, InvalidOptionError, /tokens\.shared.*shared capacity/],
    ['descriptors that are not an array', { cost: 1, id: 'a', descriptors: 'org=x' }, InvalidCheckError, /descriptors must be an array/],
  ])('a reserve with %s', async (_, fields, type, message) => {
    const withRules = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules });
    const call = withRules.reserveCheck({ domain: 'tokens', descriptors: orgAndUser('refused', 'u'), ...fields } as never);
    await expect(call).rejects.toThrow(type);
    await expect(call).rejects.toThrow(message);
    // Nothing was reserved on the limits the request matched.
    expect((await withRules.check({ domain: 'tokens', descriptors: orgAndUser('refused', 'u'), hits: 1 })).statuses.map((s) => s.limitRemaining)).toEqual([99, 29]);
  });

  it('a settle with a negative cost is refused; a limiter without rules says how to give them', async () => {
    const withRules = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules });
    await expect(withRules.settleCheck({ domain: 'tokens', descriptors: orgAndUser('o', 'u'), id: 'a', cost: -1 })).rejects.toThrow(/whole number ≥ 0/);
    await expect(limiter.reserveCheck({ domain: 'tokens', descriptors: [], cost: 1, id: 'a' })).rejects.toThrow(/need rules: createLimiter/);
  });
});
