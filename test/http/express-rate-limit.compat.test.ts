/**
 * TollgateStore against express-rate-limit's own MemoryStore, over real HTTP: the same Express app
 * and the same script of requests, once with MemoryStore and once with TollgateStore on the memory
 * store, a real single Redis and a real 3-master Cluster, under one controlled clock (vitest fakes
 * `Date`; TollgateStore's `clock` reads it; no sleeps). Statuses, bodies, getKey answers and every
 * rate limit header (legacy X-RateLimit-*, draft-6, draft-7, draft-8) must be the same.
 */
import { MemoryStore, type Options, type Store as RateLimitStore } from 'express-rate-limit';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TollgateStore } from '../../src/http/express-rate-limit.js';
import { BACKENDS, play, startApp, uniquePrefix, useBackends, type Backend, type Seen, type Step } from '../support/express-rate-limit-apps.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

/** The scripts' start: a real recent time, 123 ms past a second (first-hit windows need no round time). */
const START = Math.floor(Date.now() / 1000) * 1000 + 123;
const SECOND = 1000;
const MINUTE = 60 * SECOND;

const redis = useRedisTopologies();
const stores = useBackends(redis);
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

interface Scenario {
  readonly name: string;
  /** The options of each limiter of the app (`store` is added: one per limiter). */
  readonly limiters: readonly Partial<Options>[];
  readonly steps: readonly Step[];
}

const at = (time: number, get = '/ok', client = 'alice'): Step => ({ at: time, get, client });

const SCENARIOS: readonly Scenario[] = [
  {
    name: 'a window starts at a client\'s first hit: 429 until it ends, then a new one from the next hit',
    limiters: [{ windowMs: MINUTE, limit: 3 }],
    steps: [
      at(0), at(0), at(10_000), at(20_000), at(59_999), at(30_000, '/ok', 'bob'),
      { at: 40_000, getKey: 'alice' }, at(60_000), at(61_500), at(89_999, '/ok', 'bob'), at(90_000, '/ok', 'bob'),
    ],
  },
  {
    name: 'after a quiet spell the next window starts at the next hit; getKey of an ended window is undefined',
    limiters: [{ windowMs: 10 * SECOND, limit: 2 }],
    steps: [
      at(0), at(1000), at(2000), { at: 9_999, getKey: 'alice' }, { at: 10_000, getKey: 'alice' },
      at(25_000), at(26_700), at(27_000), { at: 30_000, getKey: 'alice' }, { at: 30_000, getKey: 'nobody' },
    ],
  },
  {
    name: 'express-rate-limit\'s defaults: 5 per minute',
    limiters: [{}],
    steps: [at(0), at(1), at(2), at(3), at(4), at(5), at(59_999), at(60_000)],
  },
  {
    name: 'skipFailedRequests: failures and 429s are refunded; a response finished after its window ended is not',
    limiters: [{ windowMs: MINUTE, limit: 2, skipFailedRequests: true }],
    steps: [
      at(0, '/fail'), at(1000, '/fail'), at(2000, '/fail'), at(3000), at(4000), at(5000), { at: 6000, getKey: 'alice' },
      at(7000, '/late/500/70000'), { at: 77_000, getKey: 'alice' }, at(78_000), at(79_000), at(80_000),
    ],
  },
  {
    name: 'a refund belongs to its window: the next window starts with none',
    limiters: [{ windowMs: MINUTE, limit: 2, skipFailedRequests: true }],
    steps: [at(0), at(50_000, '/fail'), at(60_000), at(61_000), at(62_000), { at: 63_000, getKey: 'alice' }],
  },
  {
    name: 'skipSuccessfulRequests: successes are refunded, failures count',
    limiters: [{ windowMs: MINUTE, limit: 2, skipSuccessfulRequests: true }],
    steps: [at(0), at(1), at(2), at(3, '/fail'), at(4, '/fail'), at(5, '/fail'), at(6), { at: 7, getKey: 'alice' }],
  },
  {
    name: 'resetKey forgets a client: a new window at its next hit',
    limiters: [{ windowMs: MINUTE, limit: 1, skipFailedRequests: true }],
    steps: [
      at(0, '/fail'), at(1000), at(2000), { at: 3000, resetKey: 'alice' }, { at: 3000, getKey: 'alice' },
      at(4000), at(5000), { at: 6000, getKey: 'alice' },
    ],
  },
  {
    name: 'limit as an async function of the request',
    limiters: [{ windowMs: MINUTE, limit: async (request) => (request.get('x-client') === 'gold' ? 3 : 1) }],
    steps: [at(0, '/ok', 'gold'), at(1, '/ok', 'gold'), at(2, '/ok', 'gold'), at(3, '/ok', 'gold'), at(4), at(5)],
  },
  {
    name: 'several limiters on one response (per 5 s, per minute, per hour)',
    limiters: [
      { windowMs: 5 * SECOND, limit: 1 },
      { windowMs: MINUTE, limit: 3 },
      { windowMs: 60 * MINUTE, limit: 4, identifier: 'hourly' },
    ],
    steps: [at(0), at(1000), at(6000), at(12_000), at(18_000), at(24_000), at(61_000)],
  },
];

const HEADER_MODES: readonly { name: string; options: Partial<Options> }[] = [
  { name: 'legacy X-RateLimit-*', options: { legacyHeaders: true, standardHeaders: false } },
  { name: 'draft-6', options: { legacyHeaders: false, standardHeaders: 'draft-6' } },
  { name: 'draft-7', options: { legacyHeaders: false, standardHeaders: 'draft-7' } },
  { name: 'draft-8 and legacy', options: { legacyHeaders: true, standardHeaders: 'draft-8' } },
];


/**
 * A TollgateStore on `backend` with a prefix of its own, on the fake clock. The answers are compared,
 * not their speed: a deadline far past the default 50 ms keeps a busy machine from answering a step
 * by the failure mode.
 */
function tollgateStore(backend: Backend): TollgateStore {
  return new TollgateStore({ store: stores[backend], prefix: uniquePrefix('compat'), clock: () => Date.now(), deadlineMs: 5_000 });
}

/** Plays `scenario` with the stores `makeStore` gives; returns what each step showed, and what was logged. */
async function run(scenario: Scenario, headers: Partial<Options>, makeStore: () => RateLimitStore): Promise<{ seen: Seen[]; logged: unknown[]; failures: unknown[] }> {
  const app = await startApp(scenario.limiters.map((options) => ({ ...headers, ...options, store: makeStore() })));
  const seen = await play(app, START, scenario.steps);
  return { seen, logged: app.logged, failures: app.failures };
}

describe.each(SCENARIOS)('$name', (scenario) => {
  describe.each(HEADER_MODES)('$name headers', ({ options }) => {
    it.each(BACKENDS)('TollgateStore on the $name answers as express-rate-limit\'s MemoryStore', async ({ store }) => {
      const expected = await run(scenario, options, () => new MemoryStore());
      const actual = await run(scenario, options, () => tollgateStore(store));
      expect(actual.seen).toEqual(expected.seen);
      // express-rate-limit's validations (double count, store reuse, hits, reset time) stay quiet.
      expect(actual.logged).toEqual([]);
      expect(expected.logged).toEqual([]);
      expect(actual.failures).toEqual([]);
    });
  });
});

describe('what the headers mean', () => {
  it.each(BACKENDS)('on the $name, a fresh client is told the whole window: RateLimit-Reset 60, then Retry-After counts down from the first hit', async ({ store }) => {
    const app = await startApp([{ windowMs: MINUTE, limit: 1, standardHeaders: 'draft-6', store: tollgateStore(store) }]);
    const seen = await play(app, START, [at(0), at(15_000)]);
    expect(seen).toMatchObject([
      { status: 200, headers: { 'ratelimit-reset': '60', 'ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.ceil((START + MINUTE) / 1000)) } },
      { status: 429, headers: { 'ratelimit-reset': '45', 'retry-after': '45' } },
    ]);
  });
});
