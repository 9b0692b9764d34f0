/**
 * Concurrency slots across real processes (test/support/slot-worker.mjs, through the built
 * package): 4 processes × 8 loops contending for a few slots of one key never hold more than the
 * limit at once, as a counter they keep in Redis around each hold measures; and the slots of a
 * holder killed with SIGKILL are free again once their ttl has passed, with nobody releasing them.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { createLimiter } from '../../src/index.js';
import { useRedisTopologies } from '../support/redis-topologies.js';
import { expectSlotsNeverOverLimit } from '../support/slot-hammer.js';

const WORKER = new URL('../support/slot-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const LIMIT = 5;
const HAMMER_MS = 1_500;
const TTL_MS = 300;

const redis = useRedisTopologies();

describe.each([
  ['single Redis', () => ({ url: redis.single.url })],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes })],
])('concurrency slots across processes on a %s', (_topology, storeOptions) => {
  it(`${PROCESSES} processes never hold more than the limit at once`, async () => {
    const key = `conc-hammer-${Date.now()}`;
    await expectSlotsNeverOverLimit({ storeJson: JSON.stringify(storeOptions()), counterUrl: redis.single.url, key, limit: LIMIT, ms: HAMMER_MS, processes: PROCESSES });
  }, 30_000);

  it('a holder killed with SIGKILL frees its slots within their ttl', async () => {
    const key = `conc-kill-${Date.now()}`;
    const holder = spawn(process.execPath, [WORKER, 'hold', JSON.stringify(storeOptions()), key, String(LIMIT), `${TTL_MS}ms`], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = await createInterface({ input: holder.stdout })[Symbol.asyncIterator]().next().then((next) => [next.value as string]);
    const permits = JSON.parse(line!) as { allowed: boolean; expiresAt: number }[];
    expect(permits.every((permit) => permit.allowed)).toBe(true);
    const limiter = createLimiter({ store: await redis.open(storeOptions()), deadlineMs: 5_000 });
    holder.kill('SIGKILL');
    const first = await limiter.acquire(key, { limit: LIMIT, ttl: '1s' });
    // Either still held (refused until the first expiry) or already expired, if the machine was slow.
    if (!first.allowed) expect(first.retryAfter).toBeLessThanOrEqual(TTL_MS);
    let granted = first;
    while (!granted.allowed) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      granted = await limiter.acquire(key, { limit: LIMIT, ttl: '1s' });
    }
    const expiries = permits.map((permit) => permit.expiresAt);
    // Never before a slot's expiry, and soon after it (polling every 10 ms).
    expect(granted.now).toBeGreaterThanOrEqual(Math.min(...expiries));
    expect(granted.now - Math.max(...expiries)).toBeLessThan(250);
    // Every killed slot is gone: all the limit is free but the one just granted.
    const rest = [];
    for (let i = 1; i < LIMIT; i++) rest.push((await limiter.acquire(key, { limit: LIMIT, ttl: '1s', now: Math.max(...expiries) })).allowed);
    expect(rest.every(Boolean)).toBe(true);
  }, 30_000);
});
