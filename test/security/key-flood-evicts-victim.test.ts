/**
 * The attack: with `--max-keys`, a flood of fresh keys made the memory store evict a victim's
 * half-spent counter (least recently used first), so the victim's next request found a fresh key
 * and a whole new quota. A full store now evicts, of a sample, the state that carries the smallest
 * share of its limit: a flood of 10 × `--max-keys` fresh keys leaves a victim at 9 of 10 at 9.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import { createLimiter, memoryStore, type Policy } from '../../src/index.js';
import { serviceForSuite, type ServiceProcess } from '../support/service.js';

const MAX_KEYS = 1_000;
const FLOOD = 10 * MAX_KEYS;
const NOW = 1_700_000_000_000;

describe('a flood of fresh keys against a victim on a full memory store', () => {
  it.each(ALGORITHMS)('%s: the victim at 9 of 10 keeps its count under 10 × maxKeys fresh keys', (algorithm) => {
    const store = memoryStore({ maxKeys: MAX_KEYS, sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    const policy: Policy = { algorithm, limit: 10, window: '1h' };
    for (let i = 0; i < 9; i++) expect(limiter.limitSync('victim', policy, { now: NOW }).allowed).toBe(true);
    for (let i = 0; i < FLOOD; i++) limiter.limitSync(`attacker:${i}`, policy, { now: NOW + 1 });
    expect(store.stats().evictions).toBe(FLOOD + 1 - MAX_KEYS);
    // The victim has one request left, then none.
    expect(limiter.limitSync('victim', policy, { now: NOW + 2 })).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.limitSync('victim', policy, { now: NOW + 2 }).allowed).toBe(false);
  });

  it('a victim among heavy counters is not the one evicted while the flood holds lighter ones', () => {
    // Half the store is other callers' counters at 9 of 10 (the least recent slots), then the flood.
    const store = memoryStore({ maxKeys: MAX_KEYS, sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: '1h' };
    for (let k = 0; k < MAX_KEYS / 2; k++) for (let i = 0; i < 9; i++) limiter.limitSync(`heavy:${k}`, policy, { now: NOW });
    for (let i = 0; i < FLOOD; i++) limiter.limitSync(`attacker:${i}`, policy, { now: NOW + 1 });
    let kept = 0;
    for (let k = 0; k < MAX_KEYS / 2; k++) if (limiter.limitSync(`heavy:${k}`, policy, { now: NOW + 2, cost: 2 }).allowed === false) kept += 1;
    // Each eviction weighs 8 random slots besides the 8 oldest: once the flood's keys fill most of
    // the store, a heavy counter is evicted only when all 8 draws are heavy too.
    expect(kept).toBeGreaterThanOrEqual(0.8 * (MAX_KEYS / 2));
  });

  describe('through tollgate serve --max-keys', () => {
    const service = serviceForSuite(['--config', 'examples/rules', '--max-keys', '20']);
    const policy = { algorithm: 'fixed-window', limit: 10, window: '1h' };
    const limit = async (server: ServiceProcess, key: string): Promise<{ allowed: boolean; remaining: number }> => {
      const response = await fetch(server.url('/v1/limit'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key, policy }) });
      return (await response.json()) as { allowed: boolean; remaining: number };
    };

    it('the victim at 9 of 10 keeps its count under 200 fresh keys (10 × --max-keys)', async () => {
      for (let i = 0; i < 9; i++) expect((await limit(service(), 'victim')).allowed).toBe(true);
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < 200) await limit(service(), `attacker:${next++}`);
        }),
      );
      expect(await limit(service(), 'victim')).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limit(service(), 'victim')).allowed).toBe(false);
    }, 30_000);
  });
});
