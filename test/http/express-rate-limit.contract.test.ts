/**
 * What express-rate-limit expects of a store, as our own tests of TollgateStore on the memory
 * store, a real single Redis and a real 3-master Cluster: the store calls compared with
 * express-rate-limit's MemoryStore under one fake `Date` clock, the calls before `init`, `resetAll`
 * scoped to the prefix, express-rate-limit's store validations (reuse, double count, creation in a
 * handler), and `passOnStoreError` with a Redis server killed mid-run.
 */
import express from 'express';
import { MemoryStore, rateLimit, type Options } from 'express-rate-limit';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TollgateStore } from '../../src/http/express-rate-limit.js';
import { StoreUnavailableError, createLimiter, redisStore } from '../../src/index.js';
import { BACKENDS, startApp, uniquePrefix, useBackends } from '../support/express-rate-limit-apps.js';
import { startRedis } from '../support/redis.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

const START = Math.floor(Date.now() / 1000) * 1000 + 321;
const MINUTE = 60_000;

const redis = useRedisTopologies();
const stores = useBackends(redis);



/** The store calls express-rate-limit makes, as data: [method, key, ms after the start]. */
type Call = readonly ['increment' | 'decrement' | 'get' | 'resetKey', string, number];

/** The store surface the calls need (MemoryStore and TollgateStore both have it). */
interface CountingStore {
  increment(key: string): Promise<{ totalHits: number; resetTime: Date | undefined }>;
  decrement(key: string): Promise<void>;
  get(key: string): Promise<{ totalHits: number; resetTime: Date | undefined } | undefined>;
  resetKey(key: string): Promise<void>;
}

/** Runs `calls` at their times on the fake clock; what each answered (reset times in ms). */
async function callAll(store: CountingStore, calls: readonly Call[]): Promise<unknown[]> {
  const answers: unknown[] = [];
  for (const [method, key, at] of calls) {
    vi.setSystemTime(START + at);
    const answer = await store[method](key);
    answers.push(answer === undefined ? 'nothing' : { totalHits: answer.totalHits, resetTime: answer.resetTime?.getTime() });
  }
  return answers;
}

const CALLS: readonly Call[] = [
  ['get', 'a', 0],
  ['increment', 'a', 0],
  ['increment', 'a', 1000],
  ['get', 'a', 2000],
  ['decrement', 'a', 3000],
  ['get', 'a', 3000],
  // Never below 0: more refunds than hits leave 0, and the next hit counts 1.
  ['decrement', 'a', 4000],
  ['decrement', 'a', 4000],
  ['get', 'a', 4000],
  ['increment', 'a', 5000],
  ['increment', 'a', 5000],
  ['increment', 'b', 6000],
  ['resetKey', 'a', 7000],
  ['get', 'a', 7000],
  ['increment', 'a', 8000],
  ['get', 'b', 65_999],
  ['get', 'b', 66_000],
  ['increment', 'b', 66_000],
  ['decrement', 'b', 67_000],
  ['increment', 'b', 68_000],
  ['increment', 'a', 68_000],
];

describe.each(BACKENDS)('TollgateStore on the $name', ({ store: backend }) => {
  describe('under a fake clock', () => {
    beforeEach(() => {
      vi.useFakeTimers({ toFake: ['Date'] });
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it('answers increment, decrement, get and resetKey as express-rate-limit\'s MemoryStore', async () => {
      vi.setSystemTime(START);
      const memory = new MemoryStore();
      memory.init({ windowMs: MINUTE } as Options);
      const tollgate = new TollgateStore({ store: stores[backend], prefix: uniquePrefix('contract'), clock: () => Date.now() });
      tollgate.init({ windowMs: MINUTE });
      try {
        expect(await callAll(tollgate, CALLS)).toEqual(await callAll(memory, CALLS));
      } finally {
        memory.shutdown();
      }
    });

    it('works before init, with express-rate-limit\'s default window of one minute', async () => {
      const tollgate = new TollgateStore({ store: stores[backend], prefix: uniquePrefix('contract'), clock: () => Date.now() });
      const calls: Call[] = [['increment', 'k', 0], ['increment', 'k', 10], ['decrement', 'k', 20], ['get', 'k', 30], ['resetKey', 'k', 40], ['get', 'k', 40], ['increment', 'k', 50]];
      expect(await callAll(tollgate, calls)).toEqual([
        { totalHits: 1, resetTime: START + MINUTE },
        { totalHits: 2, resetTime: START + MINUTE },
        'nothing',
        { totalHits: 1, resetTime: START + MINUTE },
        'nothing',
        'nothing',
        { totalHits: 1, resetTime: START + 50 + MINUTE },
      ]);
      await tollgate.resetAll();
      expect(await tollgate.get('k')).toBeUndefined();
    });
  });

  it('resetAll forgets this prefix\'s keys only: other prefixes and Tollgate\'s own limiters keep theirs', async () => {
    const store = stores[backend];
    const prefix = uniquePrefix('contract');
    const mine = new TollgateStore({ store, prefix });
    const longer = new TollgateStore({ store, prefix: `${prefix.slice(0, -1)}-x:` });
    const other = new TollgateStore({ store, prefix: uniquePrefix('contract') });
    const limiter = createLimiter({ store });
    const ownKey = `user:${prefix}`;
    const policy = { algorithm: 'fixed-window', limit: 10, window: '1m' } as const;
    for (const erlStore of [mine, longer, other]) {
      erlStore.init({ windowMs: MINUTE });
      for (const key of ['1.2.3.4', 'a#refunds', '*']) await erlStore.increment(key);
      await erlStore.increment('1.2.3.4');
      await erlStore.decrement('1.2.3.4');
    }
    await limiter.limit(ownKey, policy);
    await mine.resetAll();
    for (const key of ['1.2.3.4', 'a#refunds', '*']) {
      expect(await mine.get(key)).toBeUndefined();
      expect((await longer.get(key))?.totalHits).toBe(1);
      expect((await other.get(key))?.totalHits).toBe(1);
    }
    // The refund is gone with the hits: a fresh count.
    expect((await mine.increment('1.2.3.4')).totalHits).toBe(1);
    expect((await limiter.peek(ownKey, policy)).remaining).toBe(8);
  });

  it('express-rate-limit\'s store validations: no double count with distinct prefixes, a double count with one, reuse refused', async () => {
    const store = stores[backend];
    const shared = uniquePrefix('contract');
    const apps = {
      distinct: await startApp([{ limit: 5, store: new TollgateStore({ store, prefix: uniquePrefix('contract') }) }, { limit: 5, store: new TollgateStore({ store, prefix: uniquePrefix('contract') }) }]),
      same: await startApp([{ limit: 5, store: new TollgateStore({ store, prefix: shared }) }, { limit: 5, windowMs: 2 * MINUTE, store: new TollgateStore({ store, prefix: shared }) }]),
    };
    expect((await apps.distinct.get('/ok', 'x')).status).toBe(200);
    expect((await apps.same.get('/ok', 'x')).status).toBe(200);
    expect(apps.distinct.logged).toEqual([]);
    expect(apps.same.logged).toEqual([expect.objectContaining({ code: 'ERR_ERL_DOUBLE_COUNT' })]);

    const reused = new TollgateStore({ store, prefix: uniquePrefix('contract') });
    const reuse = await startApp([{ store: reused }, { store: reused }]);
    expect(reuse.logged).toEqual([expect.objectContaining({ code: 'ERR_ERL_STORE_REUSE', message: expect.stringContaining('TollgateStore (with a unique prefix)') })]);
  });

  it('express-rate-limit\'s creation check: a limiter made in a request handler is reported (external store wording)', async () => {
    const logged: unknown[] = [];
    const app = express();
    app.get('/', (_request, response) => {
      rateLimit({ store: new TollgateStore({ store: stores[backend], prefix: uniquePrefix('contract') }), logger: { error: (error) => logged.push(error), warn: (error) => logged.push(error) } });
      response.send('made');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const { port } = server.address() as { port: number };
      expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('made');
    } finally {
      server.closeAllConnections();
      server.close();
    }
    expect(logged).toEqual([expect.objectContaining({ code: 'ERR_ERL_CREATED_IN_REQUEST_HANDLER', message: expect.stringContaining('*usually*') })]);
  });
});

describe('a Redis server that dies', () => {
  it('passOnStoreError: true lets requests through (logged), false answers 500; counting resumes after a restart', async () => {
    const server = await startRedis();
    const store = redisStore({ url: server.url, connectTimeoutMs: 500, commandTimeoutMs: 500 });
    try {
      await store.ready();
      const open = await startApp([{ limit: 2, passOnStoreError: true, store: new TollgateStore({ store, prefix: uniquePrefix('contract') }) }]);
      const closed = await startApp([{ limit: 2, passOnStoreError: false, store: new TollgateStore({ store, prefix: uniquePrefix('contract') }) }]);
      const before = await open.get('/ok', 'erin');
      expect(before).toMatchObject({ status: 200, headers: { 'x-ratelimit-remaining': '1' } });

      process.kill(server.pid, 'SIGKILL');
      await expect.poll(() => store.client.status, { timeout: 5000 }).not.toBe('ready');
      const passed = await open.get('/ok', 'erin');
      // Let through without rate limiting: no rate limit headers.
      expect(passed).toEqual({ status: 200, body: 'ok', headers: {} });
      expect(open.logged).toEqual([expect.any(StoreUnavailableError)]);
      expect(await closed.get('/ok', 'erin')).toMatchObject({ status: 500, body: 'error' });
      expect(closed.failures).toEqual([expect.any(StoreUnavailableError)]);

      await server.restart();
      // Wait for the reconnect without sending checks: a check that timed out while the client was
      // reconnecting may still run once it is back, so the count is asserted on a key no check
      // touched during the outage.
      await expect.poll(() => store.client.status, { timeout: 10_000 }).toBe('ready');
      expect((await open.get('/ok', 'frank')).headers['x-ratelimit-remaining']).toBe('1');
      expect((await open.get('/ok', 'frank')).headers['x-ratelimit-remaining']).toBe('0');
      expect((await open.get('/ok', 'frank')).status).toBe(429);
    } finally {
      await store.close();
      await server.stop();
    }
  });
});
