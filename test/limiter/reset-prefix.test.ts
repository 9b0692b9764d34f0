/**
 * `limiter.resetPrefix(prefix)`: forgets every key that starts with the prefix, under every policy,
 * on the memory store, a real single Redis and a real 3-master Cluster; keys of other prefixes
 * (including ones that only differ by a glob character, a brace or a percent sign) survive.
 */
import { describe, expect, it } from 'vitest';
import { InvalidKeyError, StoreUnavailableError, createLimiter, redisStore, type Policy } from '../../src/index.js';
import { freePort } from '../support/redis.js';
import { storeTopologies, useRedisTopologies } from '../support/redis-topologies.js';

const NOW = 1_700_000_000_000;
const POLICIES: readonly Policy[] = [
  { algorithm: 'fixed-window', limit: 5, window: '1m' },
  { algorithm: 'fixed-window', limit: 5, window: '1m', windowStart: 'first-hit' },
  { algorithm: 'token-bucket', limit: 5, window: '1s' },
  { algorithm: 'sliding-log', limit: 5, window: '1h' },
];

const redis = useRedisTopologies();
const topologies = storeTopologies(redis);

function unique(name: string): string {
  return `${name}${Math.random().toString(36).slice(2)}:`;
}

describe.each(topologies)('resetPrefix on the $name', ({ open }) => {
  it('forgets the prefix\'s keys under every policy, and only those', async () => {
    const limiter = createLimiter({ store: await open() });
    const prefix = unique('erl:');
    const doomed = ['a', 'b#refunds', '{x}', '%7B', 'ü'].map((key) => prefix + key);
    // Other prefixes: one that extends the glob or escape reading of the prefix, Tollgate's own.
    const kept = ['user:42', `${prefix.slice(0, -1)}-other:a`, `x${prefix}a`, prefix.slice(0, -1)];
    for (const key of [...doomed, ...kept]) {
      for (const policy of POLICIES) await limiter.limit(key, policy, { now: NOW });
    }
    expect(await limiter.resetPrefix(prefix)).toBe(doomed.length * POLICIES.length);
    for (const policy of POLICIES) {
      for (const key of doomed) expect((await limiter.peek(key, policy, { now: NOW })).remaining, key).toBe(4);
      for (const key of kept) expect((await limiter.peek(key, policy, { now: NOW })).remaining, key).toBe(3);
    }
    expect(await limiter.resetPrefix(prefix)).toBe(0);
  });

  it('reads glob characters, braces and percent signs in the prefix as themselves', async () => {
    const limiter = createLimiter({ store: await open() });
    const base = unique('g');
    const prefix = `${base}*?[ab]\\{%}`;
    const policy = POLICIES[0]!;
    const doomed = `${prefix}1`;
    // Each would be matched if the glob characters (first), the backslash (second) or the percent
    // escapes (third) were not read as themselves.
    const kept = [`${base}Qa{%}1`, `${base}*?[ab]{%}1`, `${base}*?[ab]\\%7B%}1`];
    for (const key of [doomed, ...kept]) await limiter.limit(key, policy, { now: NOW });
    expect(await limiter.resetPrefix(prefix)).toBe(1);
    expect((await limiter.peek(doomed, policy, { now: NOW })).remaining).toBe(4);
    for (const key of kept) expect((await limiter.peek(key, policy, { now: NOW })).remaining, key).toBe(3);
  });

  it('refuses an empty or non-string prefix', async () => {
    const limiter = createLimiter({ store: await open() });
    await expect(limiter.resetPrefix('')).rejects.toThrow(InvalidKeyError);
    await expect(limiter.resetPrefix(7 as never)).rejects.toThrow(/non-empty key prefix/);
  });
});

describe('resetPrefix on Redis', () => {
  it('removes many keys in pages (more than one SCAN page) on a Cluster', async () => {
    // 2,500 calls at once on a busy machine: past the 50 ms default one could be answered by the
    // fallback while its script still ran, after the reset. This test is about the reset's pages.
    const limiter = createLimiter({ store: await redis.open({ cluster: redis.cluster.nodes }), deadlineMs: 10_000 });
    const prefix = unique('many:');
    const policy = POLICIES[0]!;
    await Promise.all(Array.from({ length: 2500 }, (_, i) => limiter.limit(`${prefix}${i}`, policy, { now: NOW })));
    expect(await limiter.resetPrefix(prefix)).toBe(2500);
    expect((await limiter.peek(`${prefix}7`, policy, { now: NOW })).remaining).toBe(4);
  });

  it('rejects with StoreUnavailableError when Redis is unreachable', async () => {
    const store = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 300 });
    try {
      await expect(createLimiter({ store }).resetPrefix('erl:')).rejects.toThrow(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });
});
