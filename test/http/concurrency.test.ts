/**
 * The middleware's `concurrency` option over real HTTP on loopback: node:http (Express's shape)
 * and Fastify hold a slot per request in flight and release it when the response finishes or the
 * client goes away; two servers on one Redis share the limit; a refused request gets 429 with
 * Retry-After; bad options are refused when the middleware is made.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError, memoryStore, redisStore, type Store } from '../../src/index.js';
import { rateLimitHook } from '../../src/http/fastify.js';
import { rateLimiter } from '../../src/http/hono.js';
import { rateLimit, type RateLimitOptions } from '../../src/http/node.js';
import { freePort } from '../support/redis.js';
import { useRedisServer } from '../support/redis-topologies.js';

const redis = useRedisServer();
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
});

/** A server whose handler holds each admitted request until the test answers it. */
interface HoldingServer {
  readonly url: string;
  /** Responses of the requests the handler is holding, in arrival order. */
  readonly held: ServerResponse[];
  /** Resolves once the handler holds `count` requests. */
  holding(count: number): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function holder(held: ServerResponse[]): Pick<HoldingServer, 'held' | 'holding'> {
  return {
    held,
    holding: async (count) => {
      while (held.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
    },
  };
}

async function nodeServer(options: RateLimitOptions): Promise<HoldingServer> {
  const middleware = rateLimit(options);
  const held: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => middleware(req, res, () => void held.push(res)));
  return { url: await listen(server), ...holder(held) };
}

async function fastifyServer(options: RateLimitOptions): Promise<HoldingServer> {
  const app = Fastify();
  const held: ServerResponse[] = [];
  app.get('/', { onRequest: rateLimitHook(options as never) }, (_request, reply) => {
    held.push(reply.raw);
    return new Promise(() => undefined);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close());
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, ...holder(held) };
}

const finish = (res: ServerResponse): void => void res.writeHead(200).end('done');

describe.each([
  ['node:http', nodeServer],
  ['Fastify', fastifyServer],
] as const)('concurrency on %s', (_framework, start) => {
  const store = (): Store => memoryStore({ sweepIntervalMs: 0 });

  it('holds at most the limit in flight; a finished response frees its slot', async () => {
    const app = await start({ concurrency: { limit: 2, ttl: '10s' }, store: store() });
    const first = [fetch(app.url), fetch(app.url)];
    await app.holding(2);
    const refused = await fetch(app.url);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('10');
    expect(await refused.json()).toMatchObject({ error: 'too_many_concurrent_requests', limit: 2, held: 2 });
    finish(app.held[0]!);
    expect((await first[0]!).status).toBe(200);
    const third = fetch(app.url);
    await app.holding(3);
    finish(app.held[1]!);
    finish(app.held[2]!);
    expect([(await first[1]!).status, (await third).status]).toEqual([200, 200]);
  });

  it('a request the skip option lets through takes no slot', async () => {
    const app = await start({ concurrency: { limit: 1, ttl: '1m' }, store: store(), skip: (req) => (req as IncomingMessage).headers['x-skip'] === 'yes' });
    const held = fetch(app.url);
    await app.holding(1);
    const skipped = fetch(app.url, { headers: { 'x-skip': 'yes' } });
    await app.holding(2);
    expect((await fetch(app.url)).status).toBe(429);
    finish(app.held[0]!);
    finish(app.held[1]!);
    expect([(await held).status, (await skipped).status]).toEqual([200, 200]);
  });

  it('a client that aborts frees its slot', async () => {
    const app = await start({ concurrency: { limit: 1, ttl: '1m' }, store: store() });
    const abort = new AbortController();
    const gone = fetch(app.url, { signal: abort.signal }).catch((error: unknown) => error);
    await app.holding(1);
    expect((await fetch(app.url)).status).toBe(429);
    abort.abort();
    await gone;
    // The handler never answered: the connection's close released the slot, and the next request is held.
    let next: Response | 'held' = 'held';
    for (let i = 0; i < 50; i++) {
      next = await fetch(app.url, { signal: AbortSignal.timeout(300) }).catch(() => 'held' as const);
      if (next === 'held') break;
      expect(next.status).toBe(429);
    }
    expect(next).toBe('held');
    expect(app.held.length).toBe(2);
  });
});

describe('concurrency with rate limits and on Redis', () => {
  it('two servers on one Redis share the limit; a request the rate limit refuses takes no slot', async () => {
    const options = (): RateLimitOptions => ({ concurrency: { limit: 2, ttl: '10s', key: () => 'shared' }, policy: { algorithm: 'fixed-window', limit: 3, window: '1h' }, key: (req) => String(req.headers['x-user']) });
    const stores = [redisStore({ url: redis.url, deadlineMs: 5_000 }), redisStore({ url: redis.url, deadlineMs: 5_000 })];
    redis.stores.push(...stores);
    await Promise.all(stores.map((store) => store.ready()));
    const [a, b] = [await nodeServer({ ...options(), store: stores[0] }), await nodeServer({ ...options(), store: stores[1] })];
    const inFlight = [fetch(a.url, { headers: { 'x-user': 'u1' } }), fetch(b.url, { headers: { 'x-user': 'u2' } })];
    await Promise.all([a.holding(1), b.holding(1)]);
    expect((await fetch(a.url, { headers: { 'x-user': 'u3' } })).status).toBe(429);
    // u3 was refused by concurrency, and the limit did count it: its rate limit is spent first.
    for (let i = 0; i < 2; i++) expect((await fetch(b.url, { headers: { 'x-user': 'u3' } })).status).toBe(429);
    finish(a.held[0]!);
    finish(b.held[0]!);
    await Promise.all(inFlight);
    const other = fetch(b.url, { headers: { 'x-user': 'u4' } });
    await b.holding(2);
    const spent = await fetch(b.url, { headers: { 'x-user': 'u3' } });
    expect(spent.status).toBe(429);
    expect(await spent.json()).toMatchObject({ error: 'rate_limited' });
    // u3's refusal took no slot: one is still free.
    const last = fetch(a.url, { headers: { 'x-user': 'u5' } });
    await a.holding(2);
    finish(b.held[1]!);
    finish(a.held[1]!);
    expect((await last).status).toBe(200);
    expect((await other).status).toBe(200);
  });

  it('a store that cannot answer: closed refuses with 503 (or 429 by failClosedStatus), local holds its share, each marked Tollgate-Degraded', async () => {
    const dead = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 100 });
    redis.stores.push(dead);
    await dead.ready().catch(() => undefined);
    const closed = await nodeServer({ concurrency: { limit: 2, ttl: '10s' }, store: dead, failureMode: 'closed' });
    const refused = await fetch(closed.url);
    expect([refused.status, refused.headers.get('tollgate-degraded'), refused.headers.get('retry-after')]).toEqual([503, 'fail-closed', '1']);
    const as429 = await nodeServer({ concurrency: { limit: 2, ttl: '10s' }, store: dead, failureMode: 'closed', failClosedStatus: 429 });
    expect((await fetch(as429.url)).status).toBe(429);
    const local = await nodeServer({ concurrency: { limit: 2, ttl: '10s' }, store: dead, expectedNodes: 2 });
    const held = fetch(local.url);
    await local.holding(1);
    const over = await fetch(local.url);
    expect([over.status, over.headers.get('tollgate-degraded')]).toEqual([429, 'local-fallback']);
    finish(local.held[0]!);
    expect((await held).status).toBe(200);
  });

  it.each([
    [{ limit: 0, ttl: '1s' }, /concurrency.limit/],
    [{ limit: 2 }, /concurrency.ttl/],
    [{ limit: 2, ttl: '1s', max: 3 }, /unknown option "max"/],
    ['10', /concurrency options must be an object/],
  ])('refuses concurrency %j when the middleware is made', (concurrency, message) => {
    expect(() => rateLimit({ concurrency: concurrency as never })).toThrow(InvalidOptionError);
    expect(() => rateLimit({ concurrency: concurrency as never })).toThrow(message);
  });

  it('Hono refuses concurrency, saying what to do instead', () => {
    expect(() => rateLimiter({ concurrency: { limit: 1, ttl: '1s' }, policy: { algorithm: 'fixed-window', limit: 1, window: '1s' } })).toThrow(/limiter.acquire/);
  });
});
