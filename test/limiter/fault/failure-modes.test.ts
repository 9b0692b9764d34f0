/**
 * Failure modes through the library's public interface, on real Redis servers that the tests stop
 * (SIGSTOP: connections open, no answers) or that were never there (a free port): per limiter, per
 * call, per limit of a multi-limit call and per rule; deadlines per store, per limiter, per call and
 * per rule; a late reply never flips an answer or counts twice; and no input can force the fail path.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, loadRules, redisStore, TollgateError, type Policy, type RedisStore } from '../../../src/index.js';
import { compileRules, parseRules } from '../../../src/rules/index.js';
import { freePort } from '../../support/redis.js';
import { liveStore as liveRedisStore, useRedisServer, whileStalled as stalled } from '../../support/redis-topologies.js';

const HOURLY: Policy = { algorithm: 'fixed-window', limit: 4, window: '1h' };
const redis = useRedisServer();
const { stores } = redis;

async function deadStore(): Promise<RedisStore> {
  const store = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 100 });
  stores.push(store);
  await store.ready().catch(() => undefined);
  return store;
}

const liveStore = (options: { deadlineMs?: number } = {}): Promise<RedisStore> => liveRedisStore(redis, options);
const whileStalled = <T>(during: () => Promise<T>): Promise<T> => stalled(redis, during);

const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

describe('failure modes', () => {
  it('local (the default) enforces ⌈limit / expectedNodes⌉ in this process, marked local-fallback', async () => {
    const limiter = createLimiter({ store: await deadStore(), expectedNodes: 3 });
    const decisions = [];
    for (let i = 0; i < 3; i++) decisions.push(await limiter.limit('k', HOURLY));
    expect(decisions.map((d) => [d.allowed, d.limit, d.reason])).toEqual([
      [true, 2, 'local-fallback'],
      [true, 2, 'local-fallback'],
      [false, 2, 'local-fallback'],
    ]);
  });

  it('open admits and closed refuses (retry in 1 s), per limiter and per call', async () => {
    const store = await deadStore();
    const open = createLimiter({ store, failureMode: 'open' });
    expect(await open.limit('k', HOURLY, { now: 1_000 })).toEqual({ allowed: true, limit: 4, remaining: 3, resetAt: 3_601_000, retryAfter: 0, now: 1_000, reason: 'fail-open' });
    expect(await open.limit('k', HOURLY, { now: 1_000, failureMode: 'closed' })).toEqual({ allowed: false, limit: 4, remaining: 0, resetAt: 2_000, retryAfter: 1_000, now: 1_000, reason: 'fail-closed' });
    // A look is never refused, whatever the failure mode.
    expect((await open.look('k', HOURLY, { failureMode: 'closed' })).allowed).toBe(true);
  });

  it('limitAll: each limit by its own mode, still all-or-nothing (a closed refusal spends no local quota)', async () => {
    const limiter = createLimiter({ store: await deadStore() });
    const local = { key: 'ip', policy: { algorithm: 'fixed-window', limit: 1, window: '1h' } as Policy };
    const both = await limiter.limitAll([local, { key: 'user', policy: HOURLY, failureMode: 'closed' }]);
    expect(both.map((d) => [d.allowed, d.reason])).toEqual([[true, 'local-fallback'], [false, 'fail-closed']]);
    // The refused request spent nothing: the local limit of 1 still admits once.
    expect((await limiter.limit('ip', local.policy)).allowed).toBe(true);
    expect((await limiter.limit('ip', local.policy)).allowed).toBe(false);
  });

  it('rules: failure_mode per rule, the service default for the others, and the check says it was degraded', async () => {
    const rules = compileRules(
      parseRules(
        `domain: app
descriptors:
  - key: open_key
    rate_limit: { unit: hour, requests_per_unit: 1, failure_mode: open }
  - key: closed_key
    rate_limit: { unit: hour, requests_per_unit: 100, failure_mode: closed }
  - key: plain
    rate_limit: { unit: hour, requests_per_unit: 1 }
`,
        'rules.yaml',
      ),
    );
    const limiter = createLimiter({ store: await deadStore(), rules: { current: rules } as never });
    const check = (key: string) => limiter.check({ domain: 'app', descriptors: [{ entries: [{ key, value: 'v' }] }] });
    const open = await check('open_key');
    expect([open.overallCode, open.degraded, open.statuses[0]!.degraded]).toEqual(['OK', 'fail-open', 'fail-open']);
    const closed = await check('closed_key');
    expect([closed.overallCode, closed.degraded]).toEqual(['OVER_LIMIT', 'fail-closed']);
    expect([(await check('plain')).degraded, (await check('plain')).overallCode]).toEqual(['local-fallback', 'OVER_LIMIT']);
    const mixed = await limiter.check({ domain: 'app', descriptors: [{ entries: [{ key: 'open_key', value: 'w' }] }, { entries: [{ key: 'closed_key', value: 'w' }] }] });
    expect(mixed.degraded).toBe('fail-closed'); // the most severe
  });
});

describe('deadlines', () => {
  it('per limiter (default 50 ms), per call and per store; the fallback answers at the deadline', async () => {
    const limiter = createLimiter({ store: await liveStore(), breaker: false });
    const fromStore = createLimiter({ store: await liveStore({ deadlineMs: 700 }), breaker: false });
    const timings = await whileStalled(async () => {
      const time = async (decide: () => Promise<unknown>) => {
        const started = performance.now();
        const decision = (await decide()) as { reason?: string };
        return [Math.round(performance.now() - started), decision.reason] as const;
      };
      return [
        await time(() => limiter.limit(unique('d'), HOURLY)),
        await time(() => limiter.limit(unique('d'), HOURLY, { deadlineMs: 350 })),
        await time(() => fromStore.limit(unique('d'), HOURLY)),
      ];
    });
    const [byDefault, perCall, perStore] = timings as [readonly [number, string | undefined], readonly [number, string | undefined], readonly [number, string | undefined]];
    expect(byDefault[1]).toBe('local-fallback');
    expect(byDefault[0]).toBeGreaterThanOrEqual(48);
    // Upper bounds leave room for a loaded machine; the lower ones show whose deadline applied.
    expect(byDefault[0]).toBeLessThan(300);
    expect(perCall[0]).toBeGreaterThanOrEqual(348);
    expect(perCall[0]).toBeLessThan(650);
    expect(perStore[0]).toBeGreaterThanOrEqual(698);
    expect(perStore[0]).toBeLessThan(1_000);
  });

  it('per rule (deadline_ms): the smallest of the matched rules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-deadline-'));
    writeFileSync(`${dir}/rules.yaml`, 'domain: app\ndescriptors:\n  - key: fast\n    rate_limit: { unit: hour, requests_per_unit: 9, deadline_ms: 20 }\n');
    const limiter = createLimiter({ store: await liveStore(), rules: { current: await loadRules(`${dir}/rules.yaml`) } as never, breaker: false, deadlineMs: 2_000 });
    const elapsed = await whileStalled(async () => {
      const started = performance.now();
      const result = await limiter.check({ domain: 'app', descriptors: [{ entries: [{ key: 'fast', value: unique('v') }] }] });
      expect(result.degraded).toBe('local-fallback');
      return performance.now() - started;
    });
    // The rule's 20 ms, not the limiter's 2 s.
    expect(elapsed).toBeGreaterThanOrEqual(18);
    expect(elapsed).toBeLessThan(1_000);
  });

  it('a late reply never flips the answer given nor counts twice: the write lands once, the answer stands', async () => {
    const limiter = createLimiter({ store: await liveStore(), deadlineMs: 30, breaker: false, failureMode: 'closed' });
    const key = unique('late');
    const answer = await whileStalled(() => limiter.limit(key, HOURLY));
    expect([answer.allowed, answer.reason]).toEqual([false, 'fail-closed']);
    // Redis runs the queued script once it resumes: the hit is counted once (nothing is retried).
    await new Promise((resolve) => setTimeout(resolve, 100));
    const after = await limiter.look(key, HOURLY);
    expect([after.remaining, after.reason]).toEqual([HOURLY.limit - 1, undefined]);
  });

  it("a reply already waiting on the socket is never beaten by its own timer after a CPU stall: the decision is the store's, not the failure mode's", async () => {
    const store = await liveStore();
    const limiter = createLimiter({ store, deadlineMs: 20, breaker: false, failureMode: 'closed' });
    /** Starts a decision, lets its batch go out (the store sends in the check phase), then blocks the event loop. */
    const decideThenStall = async (key: string, stall: () => void) => {
      const pending = limiter.limit(key, HOURLY);
      await new Promise((resolve) => setImmediate(resolve));
      stall();
      return pending;
    };
    for (let round = 0; round < 3; round++) {
      const key = unique('stall');
      const name = store.redisKey(key, compilePolicy(HOURLY));
      const decision = await decideThenStall(key, () => {
        const started = performance.now();
        // Busy until Redis has run the script (its reply is on its way), and well past the deadline.
        while (redis.cli('EXISTS', name).trim() !== '1') {
          if (performance.now() - started > 5_000) throw new Error('the script never ran: the batch was not sent before the stall');
        }
        while (performance.now() - started < 120) {
          // the CPU stall: no timer, no I/O callback runs
        }
      });
      expect([decision.allowed, decision.remaining, decision.reason], `round ${round}`).toEqual([true, HOURLY.limit - 1, undefined]);
    }
    // The same stall with no reply waiting (Redis stopped) is the failure mode's at the deadline.
    const unanswered = await whileStalled(() =>
      decideThenStall(unique('stall'), () => {
        const started = performance.now();
        while (performance.now() - started < 120) {
          // the same stall
        }
      }),
    );
    expect([unanswered.allowed, unanswered.reason]).toEqual([false, 'fail-closed']);
  });
});

describe('input never forces the fail path', () => {
  it('bad input is refused before any store call: typed errors, never a fail-open decision; the breaker stays closed', async () => {
    const limiter = createLimiter({ store: await liveStore(), failureMode: 'open', breaker: { failureThreshold: 1 } });
    const bad: Array<() => Promise<unknown>> = [
      () => limiter.limit('', HOURLY),
      () => limiter.limit(42 as never, HOURLY),
      () => limiter.limit('x'.repeat(2_000), HOURLY),
      () => limiter.limit('k', { ...HOURLY, limit: -1 }),
      () => limiter.limit('k', { ...HOURLY, window: 'forever' } as never),
      () => limiter.limit('k', HOURLY, { cost: 0 }),
      () => limiter.limit('k', HOURLY, { cost: 2 ** 60 }),
      () => limiter.limit('k', HOURLY, { now: Number.NaN }),
      () => limiter.limit('k', HOURLY, { deadlineMs: 0 }),
      () => limiter.limit('k', HOURLY, { failureMode: 'sometimes' as never }),
      () => limiter.limitAll(Array.from({ length: 65 }, (_, i) => ({ key: `k${i}`, policy: HOURLY }))),
      () => limiter.check({ domain: '', descriptors: [] }),
    ];
    for (const call of bad) {
      const error = await call().then(
        (value) => value,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(TollgateError);
    }
    expect(limiter.health()).toMatchObject({ breaker: 'closed', fallbacks: { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 } });
  });

  it('strange but valid keys are decided by Redis, never by the failure mode', async () => {
    const limiter = createLimiter({ store: await liveStore({ deadlineMs: 5_000 }), failureMode: 'open' });
    const keys = ['{', '}', '{a}{b}', '*', '?[]', '%s%d', 'a\u0000b', '\ud83d\ude00', '\ud800', 'é'.repeat(500), ' ', '\n', 'tollgate:{x}:fw', 'x'.repeat(1_024)];
    for (const key of keys) {
      const decision = await limiter.limit(`${key}-${Math.random()}`.slice(-1_024), HOURLY);
      expect([decision.allowed, decision.reason]).toEqual([true, undefined]);
    }
    expect(limiter.health().fallbacks).toEqual({ timeout: 0, error: 0, 'breaker-open': 0, overload: 0 });
  });
});
