/**
 * docs/migrating.md's row for RateLimiterMemcache, tested against the peer itself on one real
 * memcached: a first-hit fixed window that counts rejected hits admits what RateLimiterMemcache
 * admits, call for call, with the same points left after each admitted call, as the peer's own
 * tests expect of it ("consume 1 point", "rejected when consume more than maximum points"); but a
 * cost above the limit, which the peer counts and Tollgate refuses without counting.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { createLimiter, memcachedStore, type Policy } from '../../../src/index.js';
import { useMemcached } from '../../support/memcached.js';

const require = createRequire(import.meta.url);
const Memcached = require('memcached') as new (servers: string) => { end(): void };
const { RateLimiterMemcache } = require('rate-limiter-flexible') as {
  RateLimiterMemcache: new (options: object) => { consume(key: string, points: number): Promise<{ remainingPoints: number }> };
};

const POINTS = 5;
const DURATION_S = 600;

const memcached = useMemcached();

describe('RateLimiterMemcache beside memcachedStore', () => {
  it('a first-hit fixed window counting rejected hits admits what RateLimiterMemcache admits, with the same points left; a cost above the limit is not counted', async () => {
    const client = new Memcached(memcached().address);
    const peer = new RateLimiterMemcache({ storeClient: client, points: POINTS, duration: DURATION_S, keyPrefix: 'peer' });
    const limiter = createLimiter({ store: memcachedStore({ servers: memcached().address }), deadlineMs: 5_000 });
    const policy: Policy = { algorithm: 'fixed-window', windowStart: 'first-hit', countRejected: true, limit: POINTS, window: DURATION_S * 1000 };
    try {
      const sequences = [[1], [1, 1, 1, 1, 1, 1], [2, 2, 1, 1], [1, 3, 2, 1], [5, 1], [2, 4, 1], [4, 3, 1, 1]];
      for (const [index, costs] of sequences.entries()) {
        const key = `rlf:${index}:${Math.random().toString(36).slice(2)}`;
        const theirs: (number | false)[] = [];
        const ours: (number | false)[] = [];
        for (const cost of costs) {
          theirs.push(await peer.consume(key, cost).then((answer) => answer.remainingPoints, () => false as const));
          const decision = await limiter.limit(key, policy, { cost });
          ours.push(decision.allowed ? decision.remaining : false);
        }
        expect(ours, `costs ${costs.join(', ')}`).toEqual(theirs);
      }
      // The one difference: a cost above the limit can never fit, so Tollgate refuses it without counting it.
      const key = `rlf:over:${Math.random().toString(36).slice(2)}`;
      expect(await peer.consume(key, POINTS + 1).catch(() => false)).toBe(false);
      expect(await peer.consume(key, 1).catch(() => false)).toBe(false);
      expect(await limiter.limit(key, policy, { cost: POINTS + 1 })).toMatchObject({ allowed: false, reason: 'cost-exceeds-capacity' });
      expect(await limiter.limit(key, policy)).toMatchObject({ allowed: true, remaining: POINTS - 1 });
    } finally {
      client.end();
      await limiter.close();
    }
  });
});
