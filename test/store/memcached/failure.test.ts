/**
 * Failure modes and deadlines on the Memcached store, as on Redis: the limiter's guard wraps it.
 * A memcached killed, or stopped (SIGSTOP) so that it holds calls without answering, is answered
 * by the failure mode within the deadline; once it is back, decisions come from the store again.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLimiter, memcachedStore, type Policy } from '../../../src/index.js';
import { startMemcached, type MemcachedServer } from '../../support/memcached.js';
import { stopProcess } from '../../support/stop-process.js';

const POLICY: Policy = { algorithm: 'token-bucket', limit: 100, window: '1h' };
const WINDOW: Policy = { algorithm: 'fixed-window', limit: 100, window: '1h' };
const DEADLINE_MS = 150;

let server: MemcachedServer | undefined;
afterEach(async () => {
  if (server !== undefined) {
    try {
      process.kill(server.pid, 'SIGCONT');
    } catch {
      // already gone
    }
    await server.stop();
  }
  server = undefined;
});

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/** Until a decision comes from the store again (bounded: 10 s). */
async function recovered(decide: () => Promise<{ reason?: string | undefined }>): Promise<void> {
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    if ((await decide()).reason === undefined) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('decisions did not come from memcached again within 10 s of its restart');
}

describe('memcached failures', () => {
  it.each([
    ['open', 'fail-open', true],
    ['closed', 'fail-closed', false],
  ] as const)('memcached killed: failure mode %s answers within the deadline; restarted, decisions come from the store again', async (failureMode, reason, allowed) => {
    server = await startMemcached();
    const store = memcachedStore({ servers: server.address, reconnectDelayMs: 50 });
    await store.ready();
    const limiter = createLimiter({ store, failureMode, deadlineMs: DEADLINE_MS });
    try {
      expect((await limiter.limit('killed', POLICY)).reason).toBeUndefined();
      await server.stop();
      for (const policy of [POLICY, WINDOW]) {
        const { value, ms } = await timed(() => limiter.limit('killed', policy));
        expect(value, server.logTail()).toMatchObject({ allowed, reason });
        expect(ms).toBeLessThan(DEADLINE_MS + 200);
      }
      await server.restart();
      await recovered(() => limiter.limit('killed', POLICY));
      // A restarted memcached lost the state: the key starts fresh.
      expect(await limiter.limit('again', WINDOW)).toMatchObject({ allowed: true, remaining: 99 });
    } finally {
      await limiter.close();
    }
  }, 30_000);

  it('memcached stopped (SIGSTOP, holding calls unanswered): the failure mode answers within the deadline; resumed, decisions come from the store again', async () => {
    server = await startMemcached();
    const store = memcachedStore({ servers: server.address, commandTimeoutMs: 500, reconnectDelayMs: 50 });
    await store.ready();
    const limiter = createLimiter({ store, failureMode: 'closed', deadlineMs: DEADLINE_MS });
    try {
      expect((await limiter.limit('paused', POLICY)).reason).toBeUndefined();
      // Every thread stopped before the call: a worker thread still running answered it once (allowed).
      await stopProcess(server.pid);
      const { value, ms } = await timed(() => limiter.limit('paused', POLICY));
      expect(value).toMatchObject({ allowed: false, reason: 'fail-closed' });
      expect(ms).toBeGreaterThanOrEqual(DEADLINE_MS - 5);
      expect(ms).toBeLessThan(DEADLINE_MS + 250);
      process.kill(server.pid, 'SIGCONT');
      await recovered(() => limiter.limit('paused', POLICY));
    } finally {
      await limiter.close();
    }
  }, 30_000);

  it('reconnects by itself, without traffic, even when its reconnect timer fires before performance.now() says the delay has passed', async () => {
    server = await startMemcached();
    const store = memcachedStore({ servers: server.address, reconnectDelayMs: 50 });
    await store.ready();
    const until = async (connected: number, what: string): Promise<void> => {
      const limit = Date.now() + 10_000;
      while (store.health().connected !== connected) {
        if (Date.now() > limit) throw new Error(`${what}: still ${store.health().connected} connected after 10 s; memcached's log:\n${server?.logTail() ?? ''}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    try {
      await server.stop();
      await until(0, 'the stop was not seen');
      // From here performance.now() lags the timers by a second: every reconnect timer fires "early"
      // (as timers may, by a fraction of a ms). Reconnecting must not depend on the two agreeing.
      const now = performance.now.bind(performance);
      const lagging = vi.spyOn(performance, 'now').mockImplementation(() => now() - 1_000);
      try {
        await server.restart();
        await until(1, 'no reconnection without traffic');
      } finally {
        lagging.mockRestore();
      }
    } finally {
      await store.close();
    }
  }, 30_000);

  it('ready() rejects with ERR_TOLLGATE_STORE_UNAVAILABLE naming a server nothing listens on', async () => {
    server = await startMemcached();
    const port = server.port;
    await server.stop();
    server = undefined;
    const store = memcachedStore({ servers: `127.0.0.1:${port}`, connectTimeoutMs: 1_000 });
    try {
      await expect(store.ready()).rejects.toMatchObject({ code: 'ERR_TOLLGATE_STORE_UNAVAILABLE', message: expect.stringContaining(`127.0.0.1:${port}`) });
    } finally {
      await store.close();
    }
  });
});
