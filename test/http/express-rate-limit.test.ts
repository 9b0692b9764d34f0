/**
 * TollgateStore under express-rate-limit: real Express 5 apps listening on loopback, driven over
 * HTTP with fetch, on the memory store, a real redis-server and a real 3-master Redis Cluster.
 * Windows are a day long and the clock is fixed, so no test depends on timing. (The comparison
 * with express-rate-limit's own MemoryStore, request by request, is in express-rate-limit.compat.test.ts.)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Options } from 'express-rate-limit';
import { afterAll, describe, expect, it } from 'vitest';
import { TollgateStore } from '../../src/http/express-rate-limit.js';
import { InvalidKeyError, InvalidOptionError, StoreUnavailableError, memoryStore, redisStore, type Store } from '../../src/index.js';
import { closeApps, startApp, type TestApp } from '../support/express-rate-limit-apps.js';
import { freePort } from '../support/redis.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

const DAY = 86_400_000;
/** Today's noon (UTC), not a round second: windows start at a key's first hit, whatever the time. */
const NOON = Math.floor(Date.now() / DAY) * DAY + DAY / 2 + 250;
const clock = () => NOON;
const root = new URL('../..', import.meta.url).pathname;

const redis = useRedisTopologies();
const memory = memoryStore({ sweepIntervalMs: 0 });
/** Stores made here and not by redis.open(): closed after the file's tests. */
const stores: Store[] = [memory];
afterAll(async () => {
  await closeApps();
  await Promise.all(stores.map((store) => store.close()));
});

function unique(name: string): string {
  return `${name}:${Math.random().toString(36).slice(2)}:`;
}

/** An app with one express-rate-limit of a day's window (unless `options` say otherwise). */
function startDayApp(options: Partial<Options>): Promise<TestApp> {
  return startApp([{ windowMs: DAY, ...options }]);
}

/** Sends `paths` one after another, each answered before the next goes out. */
async function statuses(app: TestApp, client: string, paths: readonly string[]): Promise<number[]> {
  const seen: number[] = [];
  for (const path of paths) {
    seen.push((await app.get(path, client)).status);
    await app.settle();
  }
  return seen;
}

const topologies: readonly { name: string; connect: () => Promise<Store> }[] = [
  // Every "app" gets the same memory store: limiters of one process sharing it.
  { name: 'memory store', connect: async () => memory },
  // Every "app" gets its own connection, as separate processes would.
  { name: 'single Redis', connect: () => redis.open({ url: redis.single.url }) },
  { name: 'Redis Cluster', connect: () => redis.open({ cluster: redis.cluster.nodes }) },
];

describe.each(topologies)('express-rate-limit on the $name', ({ connect }) => {
  it('admits `limit` requests per window, then answers 429, with express-rate-limit\'s headers', async () => {
    const app = await startDayApp({
      limit: 2,
      standardHeaders: 'draft-7',
      store: new TollgateStore({ store: await connect(), prefix: unique('headers'), clock }),
    });
    const replies = [await app.get('/ok', 'alice'), await app.get('/ok', 'alice'), await app.get('/ok', 'alice')];
    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 429]);
    expect(replies[2]!.body).toBe('Too many requests, please try again later.');
    expect(replies.map((reply) => reply.headers['x-ratelimit-remaining'])).toEqual(['1', '0', '0']);
    for (const [index, { headers }] of replies.entries()) {
      expect(headers['x-ratelimit-limit']).toBe('2');
      expect(headers['ratelimit-policy']).toBe('2;w=86400');
      // The window started at the first hit: it ends one day later (rounded up to a second).
      expect(Number(headers['x-ratelimit-reset'])).toBe(Math.ceil((NOON + DAY) / 1000));
      expect(headers['ratelimit']).toMatch(new RegExp(`^limit=2, remaining=${Math.max(0, 1 - index)}, reset=\\d+$`));
    }
    expect(replies[2]!.headers['retry-after']).toMatch(/^\d+$/);
    // Another client has its own count.
    expect((await app.get('/ok', 'bob')).status).toBe(200);
    expect(app.logged).toEqual([]);
  });

  it('two apps on one store share the count exactly: 200 concurrent requests, limit 50 → exactly 50 admitted', async () => {
    const prefix = unique('shared');
    // Exactness, not speed: a generous deadline, so a loaded machine's slow reply is not answered by the failure mode.
    const apps = [
      await startDayApp({ limit: 50, store: new TollgateStore({ store: await connect(), prefix, clock, deadlineMs: 5_000 }) }),
      await startDayApp({ limit: 50, store: new TollgateStore({ store: await connect(), prefix, clock, deadlineMs: 5_000 }) }),
    ];
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => apps[i % 2]!.get('/ok', 'crowd')));
    const admitted = replies.filter((reply) => reply.status === 200);
    expect(admitted).toHaveLength(50);
    expect(replies.filter((reply) => reply.status === 429)).toHaveLength(150);
    // Each admitted request saw its own count: remaining 49, 48, ..., 0, each exactly once.
    const remaining = admitted.map((reply) => Number(reply.headers['x-ratelimit-remaining'])).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(await apps[0]!.limiters[0]!.getKey('crowd')).toEqual({ totalHits: 200, resetTime: expect.any(Date) });
    expect(apps.flatMap((app) => app.logged)).toEqual([]);
  });

  it('skipFailedRequests: failed requests are refunded (decrement), and so are 429s', async () => {
    const app = await startDayApp({
      limit: 2,
      skipFailedRequests: true,
      store: new TollgateStore({ store: await connect(), prefix: unique('refunds'), clock }),
    });
    // Without refunds the third failure would already be a 429.
    expect(await statuses(app, 'carol', ['/fail', '/fail', '/fail', '/ok', '/ok', '/ok'])).toEqual([500, 500, 500, 200, 200, 429]);
    // 6 hits − 3 failures − the 429 (a status ≥ 400 is a failed request to express-rate-limit).
    expect((await app.limiters[0]!.getKey('carol'))?.totalHits).toBe(2);
    expect(app.logged).toEqual([]);
  });

  it('resetKey forgets a client\'s hits and refunds', async () => {
    const app = await startDayApp({
      limit: 1,
      skipFailedRequests: true,
      store: new TollgateStore({ store: await connect(), prefix: unique('reset'), clock }),
    });
    expect(await statuses(app, 'dave', ['/fail', '/ok', '/ok'])).toEqual([500, 200, 429]);
    await app.limiters[0]!.resetKey('dave');
    expect(await app.limiters[0]!.getKey('dave')).toBeUndefined();
    // A refund left behind would let two through now.
    expect(await statuses(app, 'dave', ['/ok', '/ok'])).toEqual([200, 429]);
    expect(app.logged).toEqual([]);
  });

  it('keeps keys apart: a key ending in "#refunds" is not another key\'s refund counter', async () => {
    const store = new TollgateStore({ store: await connect(), prefix: unique('keys'), clock });
    store.init({ windowMs: DAY });
    for (const key of ['a#refunds', 'a#refunds', 'a#refunds', 'a', 'a', 'x#', 'x%23', 'x%23']) await store.increment(key);
    expect((await store.get('a'))?.totalHits).toBe(2);
    expect((await store.get('a#refunds'))?.totalHits).toBe(3);
    expect((await store.get('x#'))?.totalHits).toBe(1);
    expect((await store.get('x%23'))?.totalHits).toBe(2);
    expect(await store.get('never-seen')).toBeUndefined();
    await store.decrement('a');
    expect(await store.increment('a')).toEqual({ totalHits: 2, resetTime: expect.any(Date) });
  });
});

describe('round trips', () => {
  it('on a single Redis, increment and get each cost one script call (hits and refunds in one batch)', async () => {
    const store = new TollgateStore({ store: await redis.open({ url: redis.single.url }), prefix: unique('trips'), clock });
    store.init({ windowMs: DAY });
    const scriptCalls = (): number => Number(/cmdstat_evalsha:calls=(\d+)/.exec(redis.single.cli('INFO', 'commandstats'))?.[1] ?? 0);
    redis.single.cli('CONFIG', 'RESETSTAT');
    await store.increment('k');
    expect(scriptCalls()).toBe(1);
    await store.get('k');
    expect(scriptCalls()).toBe(2);
  });
});

describe('an unreachable Redis', () => {
  it('passOnStoreError true lets requests through, false answers 500; the error is Tollgate\'s and nothing crashes', async () => {
    const store = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 300 });
    stores.push(store);
    const open = await startDayApp({ limit: 1, passOnStoreError: true, skipFailedRequests: true, store: new TollgateStore({ store }) });
    const closed = await startDayApp({ limit: 1, passOnStoreError: false, store: new TollgateStore({ store }) });

    expect(await statuses(open, 'erin', ['/ok', '/ok', '/fail'])).toEqual([200, 200, 500]);
    expect(open.logged).toHaveLength(3);
    for (const error of open.logged) expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(open.failures).toEqual([]);

    expect(await statuses(closed, 'erin', ['/ok', '/ok'])).toEqual([500, 500]);
    expect(closed.failures).toHaveLength(2);
    for (const error of closed.failures) expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(closed.logged).toEqual([]);
  });
});

describe('options', () => {
  it.each([
    ['not an object', null, /TollgateStore options must be an object/],
    ['no store', {}, /store must be a Tollgate store such as memoryStore\(\)/],
    ['not a store', { store: { name: 'x' } }, /store must be a Tollgate store/],
    ['a misspelt option', { store: memory, prefx: 'a:' }, /unknown option "prefx"; the options are store, prefix/],
    ['a prefix that is not a string', { store: memory, prefix: 3 }, /prefix must be a string/],
  ])('refuses %s', (_name, options, message) => {
    expect(() => new TollgateStore(options as never)).toThrow(InvalidOptionError);
    expect(() => new TollgateStore(options as never)).toThrow(message);
  });

  it.each([
    ['a fractional windowMs', { windowMs: 1500.5 }, /windowMs must be a whole number of milliseconds ≥ 1, got 1500.5/],
    ['a zero windowMs', { windowMs: 0 }, /windowMs must be a whole number of milliseconds ≥ 1, got 0/],
    ['a windowMs that is not a number', { windowMs: '1m' }, /got "1m"/],
    ['a windowMs too long to count exactly', { windowMs: 10_000_000_000 }, /windowMs 10000000000 is too long .* at most 9007190247 ms/],
    ['a limit it cannot count to', { windowMs: DAY, limit: 2e8 }, /limit 200000000 is not below the 104249990 hits/],
  ])('init refuses %s, and then every call rejects with the same error', async (_name, options, message) => {
    const store = new TollgateStore({ store: memory });
    expect(() => store.init(options as never)).toThrow(message);
    await expect(store.increment('k')).rejects.toThrow(message);
    await expect(store.decrement('k')).rejects.toThrow(message);
  });

  it('an express-rate-limit with a bad windowMs logs the init error and fails each request with it', async () => {
    const app = await startDayApp({ windowMs: 1500.5, limit: 5, store: new TollgateStore({ store: memory }) });
    expect(app.logged).toHaveLength(1);
    expect(String(app.logged[0])).toMatch(/windowMs must be a whole number of milliseconds ≥ 1, got 1500.5/);
    expect((await app.get('/ok', 'frank')).status).toBe(500);
    expect(app.failures[0]).toBeInstanceOf(InvalidOptionError);
  });

  it('rejects keys that are not strings; has express-rate-limit\'s localKeys and prefix', async () => {
    const store = new TollgateStore({ store: memory, prefix: unique('types') });
    await expect(store.increment(42 as never)).rejects.toThrow(InvalidKeyError);
    expect(store.localKeys).toBe(false);
    expect(new TollgateStore({ store: memory }).prefix).toBe('erl:');
  });

  it('refuses resetAll with an empty prefix (it would forget every key of the Tollgate store)', async () => {
    const store = new TollgateStore({ store: memory, prefix: '' });
    await expect(store.resetAll()).rejects.toThrow(/resetAll needs a prefix/);
  });
});

describe('the built package', () => {
  it('exports TollgateStore as "tollgate/express-rate-limit", with types that do not need express-rate-limit', () => {
    const script = `
      import { TollgateStore } from 'tollgate/express-rate-limit';
      import { memoryStore } from 'tollgate';
      const store = new TollgateStore({ store: memoryStore({ sweepIntervalMs: 0 }) });
      store.init({ windowMs: 60000 });
      await store.increment('k');
      console.log((await store.increment('k')).totalHits);`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(output.trim()).toBe('2');
    const types = readFileSync(new URL('../../dist/http/express-rate-limit.d.ts', import.meta.url), 'utf8');
    expect(types).toMatch(/export declare class TollgateStore/);
    expect(types).not.toMatch(/from ['"](express-rate-limit|express)['"]/);
  });
});
