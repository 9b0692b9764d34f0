/**
 * Concurrency slots through the library's public interface (`acquire`, `release`), the same
 * semantics on the memory store, a single Redis and a Redis Cluster, on explicit times: at most
 * `limit` held, refusals that say when a slot frees, releases that are idempotent, expiry after
 * `ttl`, a retried id counted once; bad input refused with typed errors before any store call.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, InvalidKeyError, InvalidOptionError, InvalidTimeError, memoryStore } from '../../src/index.js';
import { storeTopologies, useRedisTopologies } from '../support/redis-topologies.js';
import { describeSlotBehaviours } from '../support/slot-behaviours.js';

const redis = useRedisTopologies();
const T0 = Date.now();

for (const topology of storeTopologies(redis)) describeSlotBehaviours(topology.name, topology.open);

describe('concurrency slots: input', () => {
  const slots = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });

  it.each([
    ['limit 0', { limit: 0, ttl: '1s' }, InvalidOptionError, /acquire: limit/],
    ['a fractional limit', { limit: 1.5, ttl: '1s' }, InvalidOptionError, /acquire: limit/],
    ['a limit past the bound', { limit: 100_001, ttl: '1s' }, InvalidOptionError, /acquire: limit/],
    ['a limit as text', { limit: '3', ttl: '1s' }, InvalidOptionError, /acquire: limit/],
    ['no ttl', { limit: 1 }, InvalidOptionError, /acquire: ttl/],
    ['a ttl of zero', { limit: 1, ttl: '0s' }, InvalidOptionError, /acquire: ttl/],
    ['a ttl without a unit', { limit: 1, ttl: '30' }, InvalidOptionError, /acquire: ttl/],
    ['a ttl past a day', { limit: 1, ttl: '2d' }, InvalidOptionError, /at most 1d/],
    ['a bad id', { limit: 1, ttl: '1s', id: 'has space' }, InvalidKeyError, /permit id/],
    ['an unknown option', { limit: 1, ttl: '1s', cost: 2 }, InvalidOptionError, /unknown option "cost"/],
    ['a bad now', { limit: 1, ttl: '1s', now: -1 }, InvalidTimeError, /now/],
  ])('refuses %s with a typed error', async (_what, options, type, message) => {
    const refusal = slots.acquire('k', options as never);
    await expect(refusal).rejects.toBeInstanceOf(type);
    await expect(refusal).rejects.toThrow(message);
  });

  it('heldSlots refuses a bad key, more than 1,000 keys, or an unknown option, with a typed error', async () => {
    await expect(slots.heldSlots([''])).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(slots.heldSlots('k' as never)).rejects.toThrow(/array of at most 1000 keys/);
    await expect(slots.heldSlots(Array.from({ length: 1_001 }, (_, i) => `k${i}`))).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(slots.heldSlots(['k'], { failureMode: 'open' } as never)).rejects.toThrow(/unknown option "failureMode"/);
  });

  it('refuses a bad key or id on release', async () => {
    await expect(slots.acquire('', { limit: 1, ttl: '1s' })).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(slots.release('k', '')).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(slots.release('k', 'x'.repeat(129))).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(slots.release('k', 'ok', { limit: 1 } as never)).rejects.toBeInstanceOf(InvalidOptionError);
  });

  it('the memory store collects keys whose holders all expired, without a call on those keys', async () => {
    const store = memoryStore({ sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    for (let i = 0; i < 100; i++) await limiter.acquire(`dead-${i}`, { limit: 1, ttl: 10, now: T0 });
    // Calls on one other key, after every dead key's ttl: each sweeps a couple of the others.
    for (let i = 0; i < 60; i++) await limiter.acquire('alive', { limit: 1, ttl: '1h', now: T0 + 100 + i });
    expect(await limiter.release('dead-0', 'x', { now: T0 + 200 })).toBe(false);
    const table = (store as unknown as { slotTable: { size: number } }).slotTable;
    expect(table.size).toBe(1);
  });
});
