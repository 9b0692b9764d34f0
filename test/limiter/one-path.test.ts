/**
 * Regressions of the bugs that came from decisions bypassing the limiter or reading the clock
 * twice, each over real HTTP and a real Redis:
 * - `limit: 0` in the middleware let every request through on Redis (and said `X-RateLimit-Reset:
 *   NaN` on the memory store);
 * - `check()` ignored the limiter's injected clock, so `durationUntilReset` was 0 instead of 60 s;
 * - headers were computed from a later clock reading than the decision, so about one response in
 *   twelve said `X-RateLimit-Reset` one second past the end of the window.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import { createLimiter, memoryStore, redisStore, type Store } from '../../src/index.js';
import { compileRules, parseRules } from '../../src/rules/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService } from '../../src/service/server.js';
import { startApp, type RunningApp } from '../support/http-apps.js';
import { useRedisServer } from '../support/redis-topologies.js';

const redis = useRedisServer();

async function openStore(kind: 'memory' | 'redis'): Promise<Store> {
  if (kind === 'memory') return memoryStore({ sweepIntervalMs: 0 });
  const store = redisStore({ url: redis.url });
  redis.stores.push(store);
  await store.ready();
  return store;
}

describe.each(['memory', 'redis'] as const)('limit: 0 in the middleware (%s store)', (kind) => {
  it.each(ALGORITHMS)('%s: every request is refused, with readable headers and no store error', async (algorithm) => {
    const store = await openStore(kind);
    const errors: unknown[] = [];
    const app: RunningApp = await startApp('express', [
      { store, name: `zero-${algorithm}`, policy: { algorithm, limit: 0, window: '1m' }, onError: (error: unknown) => errors.push(error) },
    ]);
    try {
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${app.url}/hello`);
        expect(response.status).toBe(429);
        expect(response.headers.get('x-ratelimit-limit')).toBe('0');
        expect(response.headers.get('x-ratelimit-remaining')).toBe('0');
        expect(response.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
        expect(response.headers.get('retry-after')).toBe('60');
        expect(await response.json()).toMatchObject({ error: 'rate_limited', limit: 0, remaining: 0, retryAfter: 60 });
      }
      expect(errors).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

describe.each(['memory', 'redis'] as const)('check() decides at the limiter clock (%s store)', (kind) => {
  const rules = compileRules(parseRules('domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n', 'clock.yaml'));
  const MINUTE_START = Date.UTC(2026, 0, 1, 12, 0, 0);

  it('durationUntilReset counts from the clock, not from the process time', async () => {
    const limiter = createLimiter({ store: await openStore(kind), rules, clock: () => MINUTE_START + 15_000 });
    const result = await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: `u-${kind}` }] }] });
    expect(result.now).toBe(MINUTE_START + 15_000);
    expect(result.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 4, durationUntilReset: 45_000 });
  });

  it('the middleware in rules mode answers headers from that clock', async () => {
    const app = await startApp('express', [
      { store: await openStore(kind), rules, domain: 'api', descriptors: () => [{ entries: [{ key: 'user', value: `mw-${kind}` }] }], clock: () => MINUTE_START, headers: 'both' },
    ]);
    try {
      const response = await fetch(`${app.url}/hello`);
      expect(response.headers.get('x-ratelimit-reset')).toBe(String((MINUTE_START + 60_000) / 1000));
      expect(response.headers.get('ratelimit')).toMatch(/;t=60;/);
    } finally {
      await app.close();
    }
  });
});

/**
 * With one-second fixed windows, a request sent and answered within the same second was decided in
 * that second, so its window ends at the next whole second: `X-RateLimit-Reset` must say exactly that.
 */
function expectResetAtWindowEnd(samples: readonly { sent: number; received: number; reset: string | null }[]): void {
  const sameSecond = samples.filter(({ sent, received }) => Math.floor(sent / 1000) === Math.floor(received / 1000));
  expect(sameSecond.length).toBeGreaterThan(samples.length / 2);
  const wrong = sameSecond.filter(({ sent, reset }) => reset !== String(Math.floor(sent / 1000) + 1));
  expect(wrong).toEqual([]);
}

async function sample(url: string, init: RequestInit, count: number): Promise<{ sent: number; received: number; reset: string | null }[]> {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const sent = Date.now();
    const response = await fetch(url, init);
    await response.arrayBuffer();
    samples.push({ sent, received: Date.now(), reset: response.headers.get('x-ratelimit-reset') });
  }
  return samples;
}

describe('headers come from the instant of the decision (Redis time)', () => {
  it('the decision service: X-RateLimit-Reset is the end of the window the request was counted in', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-instant-'));
    writeFileSync(join(dir, 'rules.yaml'), 'domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: second, requests_per_unit: 1000000 }\n');
    const service = await startService(
      resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent', host: '127.0.0.1', redis: redis.url, 'response-headers': 'full' }, {}),
    );
    try {
      const body = JSON.stringify({ domain: 'api', descriptors: [{ entries: [{ key: 'tenant', value: 't1' }] }] });
      const samples = await sample(`http://127.0.0.1:${service.httpPort}/json`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }, 300);
      expectResetAtWindowEnd(samples);
    } finally {
      await service.close();
    }
  });

  it('the middleware on Redis: the same', async () => {
    const app = await startApp('node', [{ store: await openStore('redis'), name: 'instant', policy: { algorithm: 'fixed-window', limit: 1_000_000, window: '1s' } }]);
    try {
      expectResetAtWindowEnd(await sample(`${app.url}/hello`, {}, 300));
    } finally {
      await app.close();
    }
  });
});
