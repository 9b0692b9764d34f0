// One server for bench/http-middleware.js: one framework, one rate limiter (or none), one limit, in
// its own process (started and killed by PID by the benchmark). Every server answers GET /hello with
// "hello world" (text), limits every request by the client IP, fixed window of 1 hour:
//
//   node bench/http-middleware-server.js FRAMEWORK VARIANT LIMIT PORT DIST_DIR [REDIS_URL]
//
//   FRAMEWORK  express | fastify | hono | node
//   VARIANT    bare                  no rate limiter
//              tollgate-memory       Tollgate, its own memory store (the default store)
//              tollgate-redis        Tollgate, redisStore({ url: REDIS_URL })
//              peer-memory           express: express-rate-limit (MemoryStore); fastify: @fastify/rate-limit
//              peer-redis            express: express-rate-limit + rate-limit-redis (ioredis `call`);
//                                    fastify: @fastify/rate-limit with `redis: new Redis(...)` (its README's
//                                    connectTimeout 500, maxRetriesPerRequest 1)
//              tollgate-memory-next  node only: the (req, res, next) form instead of `await handle()`
//              static-headers        no limiter: a hook / middleware that sets Tollgate's three admitted
//                                    headers (X-RateLimit-Limit/-Remaining/-Reset) to constant values;
//                                    what the hook and the headers cost without a decision
//              noop                  no limiter: a hook / middleware that only passes the request on;
//                                    what the framework charges for any middleware at all (node: in
//                                    the shape of `await limiter.handle()`, answering after an await)
//              noop-next             node only: an empty (req, res, next) middleware, the shape of
//                                    tollgate-memory-next (the answer is written in the request event)
//   LIMIT      requests per hour: 1e9 (everything admitted) or 1 (everything after the first is a 429)
//   DIST_DIR   the dist/ to import Tollgate from (the benchmark passes a snapshot)
//
// Every limiter runs with its default headers. Prints "ready <port>" on stdout once listening.
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [framework, variant, limitArg, portArg, distDir, redisUrl] = process.argv.slice(2);
const limit = Number(limitArg);
const port = Number(portArg);
const WINDOW_MS = 3_600_000;
const BODY = 'hello world';
const load = (path) => import(pathToFileURL(join(distDir, path)).href);
/** What Tollgate sends on an admitted request, as constants (static-headers). */
const STATIC_HEADERS = [
  ['x-ratelimit-limit', String(limit)],
  ['x-ratelimit-remaining', String(limit - 2)],
  ['x-ratelimit-reset', String(Math.ceil(Date.now() / 3_600_000) * 3600)],
];

/** The same policy for every Tollgate variant. */
const policy = { algorithm: 'fixed-window', limit, window: '1h' };

/** Tollgate's store for this variant: undefined = the middleware's own memory store. */
async function tollgateStore() {
  if (variant !== 'tollgate-redis') return undefined;
  const { redisStore } = await load('index.js');
  const store = redisStore({ url: redisUrl });
  await store.ready();
  return store;
}

async function ioredis() {
  const { Redis } = await import('ioredis');
  const url = new URL(redisUrl);
  const client = new Redis({ host: url.hostname, port: Number(url.port), connectTimeout: 500, maxRetriesPerRequest: 1 });
  await client.ping();
  return client;
}

function unknownVariant() {
  console.error(`unknown variant ${variant} for ${framework}`);
  process.exit(2);
}

let close;

if (framework === 'express') {
  const { default: express } = await import('express');
  const app = express();
  if (variant === 'tollgate-memory' || variant === 'tollgate-redis') {
    const { rateLimit } = await load('http/index.js');
    app.use(rateLimit({ policy, store: await tollgateStore() }));
  } else if (variant === 'peer-memory' || variant === 'peer-redis') {
    const { rateLimit } = await import('express-rate-limit');
    let store;
    if (variant === 'peer-redis') {
      const { RedisStore } = await import('rate-limit-redis');
      const client = await ioredis();
      // rate-limit-redis's README, for ioredis.
      store = new RedisStore({ sendCommand: (command, ...args) => client.call(command, ...args) });
    }
    app.use(rateLimit({ windowMs: WINDOW_MS, limit, store }));
  } else if (variant === 'noop') {
    app.use((_req, _res, next) => next());
  } else if (variant === 'static-headers') {
    app.use((_req, res, next) => {
      for (const [name, value] of STATIC_HEADERS) res.setHeader(name, value);
      next();
    });
  } else if (variant !== 'bare') unknownVariant();
  app.get('/hello', (_req, res) => {
    res.send(BODY);
  });
  const server = createServer(app);
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  close = () => server.close();
} else if (framework === 'fastify') {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  if (variant === 'tollgate-memory' || variant === 'tollgate-redis') {
    const { tollgate } = await load('http/fastify.js');
    await app.register(tollgate, { policy, store: await tollgateStore() });
  } else if (variant === 'peer-memory' || variant === 'peer-redis') {
    const { default: rateLimit } = await import('@fastify/rate-limit');
    await app.register(rateLimit, { max: limit, timeWindow: WINDOW_MS, ...(variant === 'peer-redis' ? { redis: await ioredis() } : {}) });
  } else if (variant === 'noop') {
    app.addHook('onRequest', (_request, _reply, done) => done());
  } else if (variant === 'static-headers') {
    app.addHook('onRequest', (_request, reply, done) => {
      for (const [name, value] of STATIC_HEADERS) reply.header(name, value);
      done();
    });
  } else if (variant !== 'bare') unknownVariant();
  app.get('/hello', async () => BODY);
  await app.listen({ port, host: '127.0.0.1' });
  close = () => app.close();
} else if (framework === 'hono') {
  const { Hono } = await import('hono');
  const { serve } = await import('@hono/node-server');
  const app = new Hono();
  if (variant === 'tollgate-memory' || variant === 'tollgate-redis') {
    const { rateLimiter } = await load('http/hono.js');
    app.use('*', rateLimiter({ policy, store: await tollgateStore() }));
  } else if (variant === 'noop') {
    app.use('*', (_c, next) => next());
  } else if (variant === 'static-headers') {
    app.use('*', async (c, next) => {
      for (const [name, value] of STATIC_HEADERS) c.header(name, value);
      await next();
    });
  } else if (variant !== 'bare') unknownVariant();
  app.get('/hello', (c) => c.text(BODY));
  const server = await new Promise((resolve) => {
    const started = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => resolve(started));
  });
  close = () => server.close();
} else if (framework === 'node') {
  const hello = (res) => {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': BODY.length });
    res.end(BODY);
  };
  let handler;
  if (variant === 'bare') {
    handler = (_req, res) => hello(res);
  } else if (variant === 'tollgate-memory' || variant === 'tollgate-redis') {
    // The plain node:http form (RateLimitMiddleware.handle): await it, go on when it says true.
    const { rateLimit } = await load('http/index.js');
    const limiter = rateLimit({ policy, store: await tollgateStore() });
    handler = async (req, res) => {
      if (await limiter.handle(req, res)) hello(res);
    };
  } else if (variant === 'tollgate-memory-next') {
    const { rateLimit } = await load('http/index.js');
    const limiter = rateLimit({ policy });
    handler = (req, res) => limiter(req, res, () => hello(res));
  } else if (variant === 'noop') {
    // The same shape as `await limiter.handle()`: one promise per request, then the answer.
    const pass = async () => true;
    handler = async (_req, res) => {
      if (await pass()) hello(res);
    };
  } else if (variant === 'noop-next') {
    const pass = (_req, _res, next) => next();
    handler = (req, res) => pass(req, res, () => hello(res));
  } else if (variant === 'static-headers') {
    handler = (_req, res) => {
      for (const [name, value] of STATIC_HEADERS) res.setHeader(name, value);
      hello(res);
    };
  } else unknownVariant();
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  close = () => server.close();
} else {
  console.error('usage: node bench/http-middleware-server.js express|fastify|hono|node VARIANT LIMIT PORT DIST_DIR [REDIS_URL]');
  process.exit(2);
}

console.log(`ready ${port}`);
process.on('SIGTERM', () => {
  close?.();
  process.exit(0);
});
