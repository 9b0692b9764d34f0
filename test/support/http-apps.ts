/**
 * The same small app on each framework, with Tollgate middleware in front, listening on a free
 * loopback port: `/hello`, a nested router (`/api/v1/items/:id`), a prefixed route (`/admin/stats`),
 * 404s, HEAD / OPTIONS. The behaviour suite runs against every one of them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import { rateLimit, type RateLimitMiddleware } from '../../src/http/index.js';
import { tollgate, rateLimitHook } from '../../src/http/fastify.js';
import { rateLimiter } from '../../src/http/hono.js';
import type { CoreOptions } from '../../src/http/core.js';

export const FRAMEWORKS = ['node', 'express', 'fastify', 'hono'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/** Options every adapter takes (callbacks only use the framework-neutral view). */
export type SharedOptions = CoreOptions<never> & { onLimited?: never };

export interface RunningApp {
  readonly url: string;
  close(): Promise<void>;
}

/** Starts `framework` with one middleware per entry of `limiters`, applied in order. */
export async function startApp(framework: Framework, limiters: readonly SharedOptions[], perRoute?: SharedOptions): Promise<RunningApp> {
  switch (framework) {
    case 'node':
      return startNode(limiters, perRoute);
    case 'express':
      return startExpress(limiters, perRoute);
    case 'fastify':
      return startFastify(limiters, perRoute);
    case 'hono':
      return startHono(limiters, perRoute);
  }
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  });
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Listens, and on close stops the server and the middlewares' stores. */
async function serveWith(server: Server, middlewares: readonly RateLimitMiddleware[]): Promise<RunningApp> {
  const url = await listen(server);
  return {
    url,
    close: async () => {
      await closeServer(server);
      await Promise.all(middlewares.map((m) => m.close()));
    },
  };
}

async function startNode(limiters: readonly SharedOptions[], perRoute?: SharedOptions): Promise<RunningApp> {
  const middlewares = limiters.map((options) => rateLimit(options as never) as RateLimitMiddleware);
  const routeLimiter = perRoute === undefined ? undefined : (rateLimit(perRoute as never) as RateLimitMiddleware);
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]!;
    try {
      for (const middleware of middlewares) if (!(await middleware.handle(req, res))) return;
      if (path === '/limited-route' && routeLimiter !== undefined && !(await routeLimiter.handle(req, res))) return;
    } catch {
      // handle() rejects when a callback of ours (key, cost, skip) throws: a plain server answers 500.
      res.writeHead(500).end('internal error');
      return;
    }
    const known = ['/hello', '/api/v1/items/42', '/admin/stats', '/limited-route'].includes(path);
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { allow: 'GET, HEAD, OPTIONS' }).end();
      return;
    }
    res.writeHead(known ? 200 : 404, { 'content-type': 'text/plain' });
    res.end(req.method === 'HEAD' ? undefined : known ? 'ok' : 'not found');
  });
  return serveWith(server, [...middlewares, ...(routeLimiter ? [routeLimiter] : [])]);
}

async function startExpress(limiters: readonly SharedOptions[], perRoute?: SharedOptions): Promise<RunningApp> {
  const app = express();
  const middlewares = limiters.map((options) => rateLimit(options as never) as RateLimitMiddleware);
  for (const middleware of middlewares) app.use(middleware);
  app.get('/hello', (_req, res) => void res.type('text/plain').send('ok'));
  const api = express.Router();
  const v1 = express.Router();
  v1.get('/items/:id', (_req, res) => void res.type('text/plain').send('ok'));
  api.use('/v1', v1);
  app.use('/api', api);
  app.get('/admin/stats', (_req, res) => void res.type('text/plain').send('ok'));
  const routeLimiter = perRoute === undefined ? undefined : (rateLimit(perRoute as never) as RateLimitMiddleware);
  if (routeLimiter !== undefined) app.get('/limited-route', routeLimiter, (_req, res) => void res.type('text/plain').send('ok'));
  const server = createServer(app);
  return serveWith(server, [...middlewares, ...(routeLimiter ? [routeLimiter] : [])]);
}

async function startFastify(limiters: readonly SharedOptions[], perRoute?: SharedOptions): Promise<RunningApp> {
  const app = Fastify();
  for (const options of limiters) await app.register(tollgate, options as never);
  app.get('/hello', async (_request, reply) => reply.type('text/plain').send('ok'));
  await app.register(
    async (api) => {
      api.get('/v1/items/:id', async (_request, reply) => reply.type('text/plain').send('ok'));
    },
    { prefix: '/api' },
  );
  app.get('/admin/stats', async (_request, reply) => reply.type('text/plain').send('ok'));
  if (perRoute !== undefined) {
    app.get('/limited-route', { onRequest: rateLimitHook(perRoute as never) }, async (_request, reply) => reply.type('text/plain').send('ok'));
  }
  app.options('/hello', async (_request, reply) => reply.code(204).header('allow', 'GET, HEAD, OPTIONS').send());
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
}

async function startHono(limiters: readonly SharedOptions[], perRoute?: SharedOptions): Promise<RunningApp> {
  const app = new Hono();
  for (const options of limiters) app.use('*', rateLimiter(options as never));
  app.get('/hello', (c) => c.text('ok'));
  const api = new Hono();
  api.get('/v1/items/:id', (c) => c.text('ok'));
  app.route('/api', api);
  app.get('/admin/stats', (c) => c.text('ok'));
  if (perRoute !== undefined) app.get('/limited-route', rateLimiter(perRoute as never), (c) => c.text('ok'));
  app.options('/hello', () => new Response(null, { status: 204, headers: { allow: 'GET, HEAD, OPTIONS' } }));
  // A handler that builds its own Response: the rate-limit headers must still reach the client.
  app.get('/raw-response', () => new Response('raw', { headers: { 'content-type': 'text/plain' } }));
  const server = await new Promise<Server>((resolve) => {
    const started = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(started as Server));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => closeServer(server) };
}
