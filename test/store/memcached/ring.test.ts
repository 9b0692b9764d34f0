/**
 * Consistent hashing across memcached servers: keys spread evenly, and removing a server moves
 * only the keys it held (the ring alone, then three real servers holding the keys a store wrote).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, memcachedStore } from '../../../src/index.js';
import { HashRing } from '../../../src/store/memcached/ring.js';
import { startMemcached, type MemcachedServer } from '../../support/memcached.js';

const NAMES = ['10.0.0.1:11211', '10.0.0.2:11211', '10.0.0.3:11211'];
const KEYS = Array.from({ length: 30_000 }, (_, i) => `tollgate:k:user:${i}|token-bucket:60000`);

function ringOf(names: readonly string[]): HashRing<string> {
  return new HashRing(names.map((name) => ({ name, server: name })));
}

describe('the ketama ring', () => {
  it('spreads 30,000 keys over 3 servers within 25%–42% each', () => {
    const ring = ringOf(NAMES);
    const counts = new Map<string, number>();
    for (const key of KEYS) counts.set(ring.serverOf(key), (counts.get(ring.serverOf(key)) ?? 0) + 1);
    for (const name of NAMES) {
      const share = (counts.get(name) ?? 0) / KEYS.length;
      expect(share, `${name}: ${share}`).toBeGreaterThan(0.25);
      expect(share, `${name}: ${share}`).toBeLessThan(0.42);
    }
  });

  it("removing a server moves only that server's keys; adding it back restores every key's place", () => {
    const whole = ringOf(NAMES);
    const without = ringOf([NAMES[0]!, NAMES[2]!]);
    let moved = 0;
    for (const key of KEYS) {
      const before = whole.serverOf(key);
      if (before === NAMES[1]) moved += 1;
      else expect(without.serverOf(key), key).toBe(before);
    }
    expect(moved).toBeGreaterThan(0);
    const again = ringOf([NAMES[2]!, NAMES[0]!, NAMES[1]!]);
    expect(KEYS.every((key) => again.serverOf(key) === whole.serverOf(key))).toBe(true);
  });

  it('one server takes every key', () => {
    const ring = ringOf([NAMES[0]!]);
    expect(KEYS.slice(0, 100).every((key) => ring.serverOf(key) === NAMES[0])).toBe(true);
  });
});

/** `stats` curr_items of a memcached. */
function itemsOn(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write('stats\r\n'));
    let text = '';
    socket.on('data', (data) => {
      text += data.toString();
      if (text.endsWith('END\r\n')) {
        socket.destroy();
        resolve(Number(/STAT curr_items (\d+)/.exec(text)![1]));
      }
    });
    socket.on('error', reject);
  });
}

describe('three real memcached servers', () => {
  let servers: MemcachedServer[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 3; i++) servers.push(await startMemcached());
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    servers = [];
  });

  it("a store over three servers spreads 3,000 keys' state over all three, 20%–47% each", async () => {
    const store = memcachedStore({ servers: servers.map((server) => server.address) });
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    try {
      const run = Math.random().toString(36).slice(2);
      for (let i = 0; i < 3_000; i += 100) {
        await Promise.all(Array.from({ length: 100 }, (_, j) => limiter.limit(`spread:${run}:${i + j}`, { algorithm: 'token-bucket', limit: 5, window: '1m' })));
      }
      const items = await Promise.all(servers.map((server) => itemsOn(server.port)));
      expect(items.reduce((a, b) => a + b)).toBe(3_000);
      for (const count of items) {
        expect(count / 3_000, items.join(', ')).toBeGreaterThan(0.2);
        expect(count / 3_000, items.join(', ')).toBeLessThan(0.47);
      }
    } finally {
      await limiter.close();
    }
  });
});
