/**
 * The middleware's `settle` hook on a real node:http server over loopback: each request reserves
 * its estimate (`cost`), and once its response is done `settle(req, res)` says what it actually
 * took (here a response header with the tokens used) and the difference is refunded or charged.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { rateLimit, type RateLimitOptions } from '../../src/http/index.js';
import { rateLimitHook } from '../../src/http/fastify.js';
import { rateLimiter } from '../../src/http/hono.js';

const policy = { algorithm: 'fixed-window', limit: 100, window: '1h' } as const;
const KEY = 'tokens|alice';

let servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  servers = [];
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
    ['on a sliding log', { policy: { algorithm: 'sliding-log', limit: 5, window: '1m' }, settle: fromHeader }, /use sliding-window/],
  ])('is refused %s', (_, options, message) => {
    expect(() => rateLimit({ policy, ...options } as RateLimitOptions)).toThrow(message);
  });

  it('is refused by the adapters that do not settle yet (Fastify, Hono), rather than leaving every estimate standing', () => {
    expect(() => rateLimitHook({ policy, settle: fromHeader } as never)).toThrow(/settle is not offered by rateLimitHook \(Fastify\)/);
    expect(() => rateLimiter({ policy, settle: fromHeader } as never)).toThrow(/settle is not offered by rateLimiter \(Hono\)/);
  });
});
