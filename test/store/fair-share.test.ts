/**
 * Fair shares (`share: { group, weight }`, docs/semantics.md "Fair shares") through the limiter, on
 * the memory store, a real single Redis and a real 3-master Cluster, with a controlled `now`: two
 * tenants of weights 1 and 3 on a shared limit of 40 get 10 and 30 when both demand 100, one
 * alone gets all 40, and the group never admits more than its limit.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, InvalidPolicyError, compilePolicy, createLimiter, memoryStore, regionStore, type Limiter, type Policy, type Store } from '../../src/index.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

const redis = useRedisTopologies();
const WINDOW = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % WINDOW) + 1_000;

function run(): string {
  return Math.random().toString(36).slice(2);
}

function policyOf(group: string, weight: number, limit = 40): Policy {
  return { algorithm: 'fixed-window', limit, window: WINDOW, share: { group, weight } };
}

/** Admitted units of `demand` requests of each tenant, in the order `order` gives, at `now`. */
async function demand(limiter: Limiter, tenants: readonly { key: string; policy: Policy }[], order: readonly number[], now: number): Promise<number[]> {
  const admitted = tenants.map(() => 0);
  for (const index of order) {
    const tenant = tenants[index]!;
    if ((await limiter.limit(tenant.key, tenant.policy, { now })).allowed) admitted[index]! += 1;
  }
  return admitted;
}

const interleaved = (count: number): number[] => Array.from({ length: 2 * count }, (_, i) => i % 2);
const burstFirst = (count: number): number[] => [...Array<number>(count).fill(0), ...Array<number>(count).fill(1)];

const stores: readonly (readonly [string, () => Store | Promise<Store>])[] = [
  ['memory', () => memoryStore({ sweepIntervalMs: 0 })],
  ['single Redis', () => redis.open({ url: redis.single.url })],
  ['Redis Cluster', () => redis.open({ cluster: redis.cluster.nodes })],
];

describe.each(stores)('fair shares on %s', (_name, open) => {
  async function twoTenants(): Promise<{ limiter: Limiter; tenants: { key: string; policy: Policy }[] }> {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000, overLimitCache: false });
    const group = `g-${run()}`;
    return { limiter, tenants: [{ key: `light-${run()}`, policy: policyOf(group, 1) }, { key: `heavy-${run()}`, policy: policyOf(group, 3) }] };
  }

  it('weights 1 and 3 on a limit of 40, both demanding 100 interleaved: 10 and 30 in every window', async () => {
    const { limiter, tenants } = await twoTenants();
    try {
      for (let window = 0; window < 3; window++) {
        expect(await demand(limiter, tenants, interleaved(100), T0 + window * WINDOW)).toEqual([10, 30]);
      }
    } finally {
      await limiter.close();
    }
  });

  it('weights 1 and 3, the light tenant arriving first in a burst of 100 each window: 10 and 30 once both have asked', async () => {
    const { limiter, tenants } = await twoTenants();
    try {
      // The first window: the heavy tenant has never asked, so nothing is reserved for it yet.
      expect(await demand(limiter, tenants, burstFirst(100), T0)).toEqual([40, 0]);
      const totals = [0, 0];
      for (let window = 1; window <= 4; window++) {
        const admitted = await demand(limiter, tenants, burstFirst(100), T0 + window * WINDOW);
        totals[0]! += admitted[0]!;
        totals[1]! += admitted[1]!;
      }
      expect(totals[0]! / 4).toBeGreaterThanOrEqual(9);
      expect(totals[0]! / 4).toBeLessThanOrEqual(11);
      expect(totals[1]! / 4).toBeGreaterThanOrEqual(27);
      expect(totals[1]! / 4).toBeLessThanOrEqual(33);
      expect(totals).toEqual([40, 120]);
    } finally {
      await limiter.close();
    }
  });

  it('one tenant idle (never asked, or asked in neither this window nor the one before): the other gets all 40', async () => {
    const { limiter, tenants } = await twoTenants();
    try {
      expect(await demand(limiter, tenants, Array<number>(100).fill(0), T0)).toEqual([40, 0]);
      // The heavy tenant asks once, then stops: its share stays reserved through the next window, then is lent again.
      await limiter.limit(tenants[1]!.key, tenants[1]!.policy, { now: T0 + WINDOW });
      expect(await demand(limiter, tenants, Array<number>(100).fill(0), T0 + WINDOW + 1)).toEqual([10, 0]);
      expect(await demand(limiter, tenants, Array<number>(100).fill(0), T0 + 2 * WINDOW)).toEqual([10, 0]);
      expect(await demand(limiter, tenants, Array<number>(100).fill(0), T0 + 3 * WINDOW)).toEqual([40, 0]);
    } finally {
      await limiter.close();
    }
  });

  it('a busy tenant borrows what the others leave past their reserved shares, never past the group limit; a denial waits for the window end', async () => {
    const { limiter, tenants } = await twoTenants();
    try {
      // The heavy one takes 35 alone (the light one has not asked), then the light one asks: 5 are left.
      expect(await demand(limiter, tenants, Array<number>(35).fill(1), T0)).toEqual([0, 35]);
      expect(await limiter.limit(tenants[0]!.key, tenants[0]!.policy, { now: T0 + 10 })).toMatchObject({ allowed: true, limit: 40, remaining: 4 });
      expect(await demand(limiter, tenants, Array<number>(50).fill(0), T0 + 20)).toEqual([4, 0]);
      const denied = await limiter.limit(tenants[0]!.key, tenants[0]!.policy, { now: T0 + 30 });
      expect(denied).toMatchObject({ allowed: false, remaining: 0, resetAt: T0 - 1_000 + WINDOW, retryAfter: WINDOW - 1_000 - 30 });
      // The next window: the light one's 10 reserved, the heavy one takes its 30 and no more.
      expect(await demand(limiter, tenants, Array<number>(50).fill(1), T0 + WINDOW)).toEqual([0, 30]);
      expect(await demand(limiter, tenants, Array<number>(50).fill(0), T0 + WINDOW)).toEqual([10, 0]);
    } finally {
      await limiter.close();
    }
  });

  it('remaining is what the tenant can take: a request of exactly remaining is admitted, one more is not', async () => {
    const { limiter, tenants } = await twoTenants();
    try {
      await demand(limiter, tenants, [0, 1], T0);
      const look = await limiter.peek(tenants[0]!.key, tenants[0]!.policy, { now: T0 + 1 });
      expect(look).toMatchObject({ allowed: true, limit: 40, remaining: 8 });
      expect(await limiter.limit(tenants[0]!.key, tenants[0]!.policy, { now: T0 + 2, cost: 10 })).toMatchObject({ allowed: false, remaining: 9 });
      expect(await limiter.limit(tenants[0]!.key, tenants[0]!.policy, { now: T0 + 2, cost: 9 })).toMatchObject({ allowed: true, remaining: 0 });
    } finally {
      await limiter.close();
    }
  });

  it('a group holds at most 256 active tenants: the 257th is denied until the window ends, recording nothing; resetPrefix leaves the group alone', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000, overLimitCache: false });
    const group = `full-${run()}`;
    const policy = policyOf(group, 1, 1_000);
    try {
      for (let tenant = 0; tenant < 256; tenant++) expect((await limiter.limit(`t${tenant}`, policy, { now: T0 })).allowed).toBe(true);
      const refused = await limiter.limit('newcomer', policy, { now: T0 + 5 });
      expect(refused).toMatchObject({ allowed: false, remaining: 0, resetAt: T0 - 1_000 + WINDOW, retryAfter: WINDOW - 1_000 - 5 });
      expect(refused.reason).toBeUndefined();
      // Two windows on, every one of them is idle: the newcomer is admitted.
      expect((await limiter.limit('newcomer', policy, { now: T0 + 2 * WINDOW })).allowed).toBe(true);
      expect(await limiter.resetPrefix('newcomer')).toBe(0);
      expect(await limiter.peek('newcomer', policy, { now: T0 + 2 * WINDOW, cost: 1_000 })).toMatchObject({ allowed: false, remaining: 999 });
    } finally {
      await limiter.close();
    }
  }, 60_000);

  it('reset forgets one tenant: its units leave the group total', async () => {
    const { limiter, tenants } = await twoTenants();
    try {
      expect(await demand(limiter, tenants, Array<number>(50).fill(0), T0)).toEqual([40, 0]);
      await limiter.reset(tenants[0]!.key, tenants[0]!.policy);
      expect(await demand(limiter, tenants, Array<number>(50).fill(0), T0 + 1)).toEqual([40, 0]);
    } finally {
      await limiter.close();
    }
  });
});

describe('share is validated', () => {
  const limiter = createLimiter();
  it.each([
    [{ algorithm: 'token-bucket', limit: 10, window: '1m', share: { group: 'g', weight: 1 } }, /share applies to fixed-window only, not token-bucket; use algorithm: 'fixed-window'/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: { group: '', weight: 1 } }, /share.group must be a non-empty string/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: { group: 'x'.repeat(257), weight: 1 } }, /at most 256 bytes/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: { group: 'g', weight: 0 } }, /share.weight must be a whole number from 1 to 1000, got 0/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: { group: 'g', weight: 1.5 } }, /share.weight must be a whole number/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: { group: 'g', weight: 1001 } }, /from 1 to 1000/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: { group: 'g', weight: 1, extra: 1 } }, /unknown field share.extra/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', share: 'g' }, /share must be an object/],
    [{ algorithm: 'fixed-window', limit: 10, window: 'month', share: { group: 'g', weight: 1 } }, /fixed length/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', softPercent: 10, share: { group: 'g', weight: 1 } }, /does not combine with softPercent/],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', blockDuration: '1m', share: { group: 'g', weight: 1 } }, /does not combine with blockDuration/],
    [{ algorithm: 'fixed-window', limit: 10_000_000_000_000, window: '1m', share: { group: 'g', weight: 1 } }, /largest a shared capacity counts exactly/],
  ])('refuses %j', async (policy, message) => {
    const attempt = limiter.limit('k', policy as unknown as Policy);
    await expect(attempt).rejects.toBeInstanceOf(InvalidPolicyError);
    await expect(attempt).rejects.toThrow(message);
  });

  it('a lease, local-first and reserve are refused on a shared capacity, naming share', async () => {
    const policy = policyOf('g', 1);
    await expect(limiter.limit('k', policy, { lease: 10 })).rejects.toThrow(InvalidOptionError);
    await expect(limiter.limit('k', policy, { lease: 10 })).rejects.toThrow(/drop lease or share/);
    await expect(limiter.limit('k', policy, { syncIntervalMs: 100 })).rejects.toThrow(/drop syncIntervalMs or share/);
    await expect(limiter.reserve('k', policy, { id: 'r', cost: 1, ttl: 1000 })).rejects.toThrow(/shared capacity/);
  });

  it('the multi-region store refuses a shared capacity, naming share, before it reaches Redis', async () => {
    const store = regionStore({ region: 'eu', url: redis.single.url });
    try {
      await expect(store.consume('k', compilePolicy(policyOf('g', 1)), 1, undefined)).rejects.toThrow(/regionStore keeps no fair shares.*remove share, or use redisStore/);
    } finally {
      await store.close();
    }
  });
});

describe('fair shares on Redis: where the group lives', () => {
  it("one hash per group and window under the group's own hash tag, expiring 2 windows after its last write", async () => {
    const limiter = createLimiter({ store: await redis.open({ url: redis.single.url }), deadlineMs: 5_000 });
    const group = `ttl-${run()}`;
    try {
      await limiter.limit('alice', policyOf(group, 1));
      await limiter.limit('bob', policyOf(group, 2));
      const key = `tollgate:{%fs:${group}}1m`;
      expect(redis.single.cli('HKEYS', key).trim().split('\n').sort()).toEqual(['kalice', 'kbob', 's', 't']);
      const ttl = Number(redis.single.cli('PTTL', key).trim());
      expect(ttl).toBeGreaterThan(WINDOW);
      expect(ttl).toBeLessThanOrEqual(2 * WINDOW);
    } finally {
      await limiter.close();
    }
  });
});

describe('fair shares and the over-limit cache', () => {
  it('a key denied in one group is not denied in another by the cache: each group is its own state', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
    try {
      const first = policyOf(`one-${run()}`, 1, 2);
      const second = policyOf(`two-${run()}`, 1, 2);
      await limiter.limit('alice', first, { now: T0, cost: 2 });
      expect((await limiter.limit('alice', first, { now: T0 + 1 })).allowed).toBe(false);
      expect((await limiter.limit('alice', second, { now: T0 + 2 })).allowed).toBe(true);
    } finally {
      await limiter.close();
    }
  });
});

describe('fair shares: the guarantee, on random schedules (memory store)', () => {
  it('tenants all active from the window start each get at least their guaranteed share when they demand it, and the group never passes its limit', async () => {
    const fc = await import('fast-check');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 1_000 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 5 })), { minLength: 1, maxLength: 300 }),
        async (weights, limit, schedule) => {
          const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: false });
          const group = `prop-${run()}`;
          const policies = weights.map((weight) => policyOf(group, weight, limit));
          // Every tenant asks (cost 1) in the window before, so all are active from this window's start.
          for (const [index, policy] of policies.entries()) await limiter.limit(`t${index}`, policy, { now: T0 - WINDOW });
          const sum = weights.reduce((a, b) => a + b, 0);
          const used = weights.map(() => 0);
          const denied = weights.map(() => false);
          for (const [pick, cost] of schedule) {
            const index = pick % weights.length;
            const decision = await limiter.limit(`t${index}`, policies[index]!, { now: T0, cost });
            if (decision.allowed) used[index]! += cost;
            else if (used[index]! + cost <= Math.floor((limit * weights[index]!) / sum)) denied[index] = true;
          }
          await limiter.close();
          // A request that kept its tenant within its guaranteed share was never refused.
          expect(denied).toEqual(weights.map(() => false));
          expect(used.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(limit);
        },
      ),
      { numRuns: 200 },
    );
  }, 120_000);
});
