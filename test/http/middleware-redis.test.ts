/**
 * The middleware on Redis: the behaviour on a single Redis and on a Cluster, exact counting across
 * OS processes, and what a failing store does (failureMode open / closed).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { redisStore } from '../../src/index.js';
import { freePort } from '../support/redis.js';
import { useRedisTopologies } from '../support/redis-topologies.js';
import { FRAMEWORKS, startApp, type RunningApp } from '../support/http-apps.js';

const redis = useRedisTopologies();
const WORKER = fileURLToPath(new URL('../support/http-app-worker.mjs', import.meta.url));

describe.each(FRAMEWORKS)('%s middleware on Redis', (framework) => {
  let app: RunningApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it.each(['single', 'cluster'] as const)('2 per second on %s Redis: 200, 200, 429', async (topology) => {
    const store = await redis.open(topology === 'single' ? { url: redis.single.url } : { cluster: redis.cluster.nodes });
    // What the store answers: past the 50 ms default a loaded machine's first call was answered by the failure mode.
    app = await startApp(framework, [{ store, name: `${framework}-${topology}`, policy: { algorithm: 'sliding-log', limit: 2, window: '1s' }, deadlineMs: 5_000 }]);
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${app.url}/hello`);
      statuses.push([response.status, response.headers.get('x-ratelimit-remaining')]);
      if (i === 2) {
        expect(response.headers.get('retry-after')).toBe('1');
        expect(await response.json()).toMatchObject({ error: 'rate_limited', limit: 2, remaining: 0, retryAfter: 1 });
      }
    }
    expect(statuses).toEqual([[200, '1'], [200, '0'], [429, '0']]);
  });

  it('answers by the failure mode when the store is down, and says so in Tollgate-Degraded', async () => {
    const port = await freePort();
    const dead = redisStore({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 200, connectTimeoutMs: 200 });
    const policy = { algorithm: 'gcra', limit: 1, window: '1h' } as const;
    const errors: unknown[] = [];
    const statuses = async (): Promise<Array<[number, string | null]>> => {
      const answers = [await fetch(`${app!.url}/hello`), await fetch(`${app!.url}/hello`)];
      return answers.map((r) => [r.status, r.headers.get('tollgate-degraded')]);
    };
    try {
      // The default, local: this process enforces the limit on its own.
      app = await startApp(framework, [{ store: dead, policy, onError: (error) => errors.push(error) }]);
      expect(await statuses()).toEqual([[200, 'local-fallback'], [429, 'local-fallback']]);
      expect(errors.length).toBe(2);
      expect((errors[0] as { code: string }).code).toBe('ERR_TOLLGATE_STORE_UNAVAILABLE');
      await app.close();
      app = await startApp(framework, [{ store: dead, policy, failureMode: 'open', onError: () => {} }]);
      expect(await statuses()).toEqual([[200, 'fail-open'], [200, 'fail-open']]);
      await app.close();
      app = await startApp(framework, [{ store: dead, failureMode: 'closed', onError: () => {}, policy }]);
      const closed = await fetch(`${app.url}/hello`);
      expect(closed.status).toBe(503);
      expect(closed.headers.get('retry-after')).toBe('1');
      expect(closed.headers.get('tollgate-degraded')).toBe('fail-closed');
      expect(await closed.json()).toMatchObject({ error: 'rate_limiter_unavailable' });
      await app.close();
      app = await startApp(framework, [{ store: dead, failureMode: 'closed', failClosedStatus: 429, onError: () => {}, policy }]);
      expect(await statuses()).toEqual([[429, 'fail-closed'], [429, 'fail-closed']]);
    } finally {
      await dead.close();
    }
  });
});

describe('exact across OS processes', () => {
  const workers: ChildProcess[] = [];
  afterAll(() => {
    for (const worker of workers) worker.kill('SIGKILL');
  });

  async function startWorker(framework: string, limit: number): Promise<string> {
    const child = spawn(process.execPath, [WORKER, framework, redis.single.url, String(limit)], { stdio: ['ignore', 'pipe', 'inherit'] });
    workers.push(child);
    const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
    return chunk.toString().trim();
  }

  it.each(FRAMEWORKS)('%s: two processes sharing Redis admit exactly the limit', async (framework) => {
    redis.single.cli('DEL', ...(redis.single.cli('KEYS', 'tollgate:*').split('\n').filter(Boolean).concat('none')));
    const urls = await Promise.all([startWorker(framework, 100), startWorker(framework, 100)]);
    const statuses = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const response = await fetch(`${urls[i % 2]}/hello`);
        await response.arrayBuffer();
        return response.status;
      }),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.filter((s) => s === 429)).toHaveLength(200);
  });
});
