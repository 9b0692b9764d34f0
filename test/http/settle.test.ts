/**
 * The middleware's `settle` hook on a real node:http server over loopback: each request reserves
 * its estimate (`cost`), and once its response is done `settle(req, res)` says what it actually
 * took (here a response header with the tokens used) and the difference is refunded or charged.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { rateLimit, type RateLimitOptions } from '../../src/http/index.js';
import Fastify, { type FastifyReply } from 'fastify';
import { Hono, type Context } from 'hono';
import { serve } from '@hono/node-server';
import { rateLimitHook, type FastifyRateLimitOptions } from '../../src/http/fastify.js';
import { rateLimiter, type HonoRateLimitOptions } from '../../src/http/hono.js';

const policy = { algorithm: 'fixed-window', limit: 100, window: '1h' } as const;
const KEY = 'tokens|alice';

let servers: Server[] = [];
let closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  await Promise.all(closers.map((close) => close()));
  servers = [];
  closers = [];
});

/** A server limited by `options`, answering with the tokens used that the request's `?used=` says. */
async function start(options: Partial<RateLimitOptions>) {
  const errors: unknown[] = [];
  const middleware = rateLimit({ policy, name: 'tokens', key: () => 'alice', cost: 50, onError: (error) => errors.push(error), ...options } as RateLimitOptions);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    middleware(req, res, () => {
      const used = new URL(req.url ?? '/', 'http://x').searchParams.get('used') ?? '';
      res.setHeader('x-tokens-used', used);
      res.end('ok');
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const remaining = async (): Promise<number> => (await middleware.limiter.limiter.look(KEY, policy)).remaining;
  return { url, errors, remaining, get: (used: string) => fetch(`${url}/?used=${used}`) };
}

const fromHeader = (_req: IncomingMessage, res: ServerResponse): number => Number(res.getHeader('x-tokens-used'));

describe('rateLimit({ settle })', () => {
  it('reserves the estimate when the request comes in and settles the tokens the response reports', async () => {
    const app = await start({ settle: fromHeader });
    const first = await app.get('10');
    // Admitted at the estimate: 50 of 100 reserved.
    expect(first.headers.get('x-ratelimit-remaining')).toBe('50');
    // Settled once the response is done: 40 of the 50 given back.
    await vi.waitFor(async () => expect(await app.remaining()).toBe(90));
    await app.get('80');
    await vi.waitFor(async () => expect(await app.remaining()).toBe(10));
    // The next estimate (50) does not fit what is left: refused, nothing reserved.
    expect((await app.get('1')).status).toBe(429);
    expect(await app.remaining()).toBe(10);
    expect(app.errors).toEqual([]);
  });

  it('a hook that answers no cost leaves the estimate standing and says so through onError', async () => {
    const app = await start({ settle: fromHeader });
    await app.get('lots');
    await vi.waitFor(() => expect(app.errors).toHaveLength(1));
    expect(String(app.errors[0])).toMatch(/must answer what the request cost.*the estimate stands/);
    expect(await app.remaining()).toBe(50);
  });

  it.each([
    ['not a function', { settle: 5 }, /settle must be a function/],
    ['with limits', { policy: undefined, limits: [{ name: 'a', policy }], settle: fromHeader }, /one policy/],
    ['on a shared capacity', { policy: { algorithm: 'fixed-window', limit: 5, window: '1m', share: { group: 'g', weight: 1 } }, settle: fromHeader }, /shared capacity/],
  ])('is refused %s', (_, options, message) => {
    expect(() => rateLimit({ policy, ...options } as RateLimitOptions)).toThrow(message);
  });

});

/** What a settle-hook app answers: its address, the errors told, what remains of alice's quota. */
interface SettleApp {
  readonly errors: unknown[];
  remaining(): Promise<number>;
  get(used: string): Promise<Response>;
}

const usedOf = (url: string): string => new URL(url, 'http://x').searchParams.get('used') ?? '';

/** Fastify over loopback: the hook on every route, the handler reporting the tokens in a header. */
async function startFastify(settle: FastifyRateLimitOptions['settle']): Promise<SettleApp> {
  const errors: unknown[] = [];
  const hook = rateLimitHook({ policy, name: 'tokens', key: () => 'alice', cost: 50, onError: (error) => errors.push(error), settle });
  const app = Fastify();
  app.addHook('onRequest', hook);
  app.get('/', (request, reply) => reply.header('x-tokens-used', usedOf(request.url)).send('ok'));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close(), () => hook.limiter.close());
  return { errors, remaining: async () => (await hook.limiter.limiter.look(KEY, policy)).remaining, get: (used) => fetch(`${url}/?used=${used}`) };
}

/** Hono: on @hono/node-server over loopback (`nodeServer`), or through app.request (another runtime's way: no node response). */
async function startHono(settle: HonoRateLimitOptions['settle'], nodeServer: boolean): Promise<SettleApp> {
  const errors: unknown[] = [];
  const middleware = rateLimiter({ policy, name: 'tokens', key: () => 'alice', cost: 50, onError: (error) => errors.push(error), settle, remoteAddress: () => '192.0.2.1' });
  const app = new Hono();
  app.use('*', middleware);
  app.get('/', (c) => {
    c.header('x-tokens-used', usedOf(c.req.url));
    return c.text('ok');
  });
  closers.push(() => middleware.limiter.close());
  const remaining = async (): Promise<number> => (await middleware.limiter.limiter.look(KEY, policy)).remaining;
  if (!nodeServer) return { errors, remaining, get: (used) => Promise.resolve(app.request(`/?used=${used}`)) };
  const url = await new Promise<string>((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(`http://127.0.0.1:${info.port}`));
    servers.push(server as Server);
  });
  return { errors, remaining, get: (used) => fetch(`${url}/?used=${used}`) };
}

const fastifyTokens = (_request: unknown, reply: FastifyReply): number => Number(reply.getHeader('x-tokens-used'));
const honoTokens = (_c: Context, res: Response): number => Number(res.headers.get('x-tokens-used'));

describe.each([
  ['Fastify (rateLimitHook)', () => startFastify(fastifyTokens)],
  ['Hono on @hono/node-server', () => startHono(honoTokens, true)],
  ['Hono without node-server (app.request)', () => startHono(honoTokens, false)],
] as const)('settle on %s', (_name, start) => {
  it('reserves the estimate when the request comes in and settles the tokens the reply reports', async () => {
    const app = await start();
    const first = await app.get('10');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('50');
    await first.text();
    await vi.waitFor(async () => expect(await app.remaining()).toBe(90));
    await (await app.get('80')).text();
    await vi.waitFor(async () => expect(await app.remaining()).toBe(10));
    // The next estimate (50) does not fit: refused, nothing reserved, nothing to settle.
    const refused = await app.get('1');
    expect(refused.status).toBe(429);
    await refused.text();
    expect(await app.remaining()).toBe(10);
    expect(app.errors).toEqual([]);
  });

  it('a hook that answers no cost, or throws, leaves the estimate standing and says so through onError', async () => {
    const app = await start();
    await (await app.get('lots')).text();
    await vi.waitFor(() => expect(app.errors).toHaveLength(1));
    expect(String(app.errors[0])).toMatch(/must answer what the request cost.*the estimate stands/);
    expect(await app.remaining()).toBe(50);
  });
});

describe('a settle hook that throws, on Fastify and Hono', () => {
  const boom = (): number => {
    throw new Error('no usage reported');
  };
  it.each([
    ['Fastify', () => startFastify(boom)],
    ['Hono', () => startHono(boom, true)],
  ] as const)('on %s goes to onError, the estimate standing', async (_name, start) => {
    const app = await start();
    expect((await app.get('10')).status).toBe(200);
    await vi.waitFor(() => expect(app.errors).toHaveLength(1));
    expect(String(app.errors[0])).toMatch(/no usage reported/);
    expect(await app.remaining()).toBe(50);
  });

  it('is refused at creation on Fastify and Hono as on node: with limits, on a shared capacity', () => {
    expect(() => rateLimitHook({ policy: { algorithm: 'fixed-window', limit: 5, window: '1m', share: { group: 'g', weight: 1 } }, settle: fastifyTokens })).toThrow(/shared capacity/);
    expect(() => rateLimiter({ policy: undefined, limits: [{ name: 'a', policy }], settle: honoTokens } as never)).toThrow(/one policy/);
    expect(() => rateLimiter({ policy, settle: 5 } as never)).toThrow(/settle must be a function/);
  });
});
