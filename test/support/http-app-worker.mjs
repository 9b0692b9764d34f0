// One OS process serving a small app (express | fastify | hono | node) rate limited through the
// built package and a shared Redis. Prints its URL on stdout; the parent kills it by PID.
import { createServer } from 'node:http';
import { redisStore } from '../../dist/index.js';

const [framework, redisUrl, limit] = process.argv.slice(2);
const store = redisStore({ url: redisUrl });
await store.ready();
// Exactness is what is measured: a generous deadline keeps a loaded machine from turning slow answers into local ones.
const options = { store, name: 'shared', deadlineMs: 10_000, policy: { algorithm: 'sliding-window', limit: Number(limit), window: '1h' } };

let server;
if (framework === 'express') {
  const { default: express } = await import('express');
  const { rateLimit } = await import('../../dist/http/index.js');
  const app = express();
  app.use(rateLimit(options));
  app.get('/hello', (_req, res) => res.send('ok'));
  server = createServer(app);
} else if (framework === 'fastify') {
  const { default: Fastify } = await import('fastify');
  const { tollgate } = await import('../../dist/http/fastify.js');
  const app = Fastify();
  await app.register(tollgate, options);
  app.get('/hello', async () => 'ok');
  await app.ready();
  server = app.server;
} else if (framework === 'hono') {
  const { Hono } = await import('hono');
  const { getRequestListener } = await import('@hono/node-server');
  const { rateLimiter } = await import('../../dist/http/hono.js');
  const app = new Hono();
  app.use('*', rateLimiter(options));
  app.get('/hello', (c) => c.text('ok'));
  server = createServer(getRequestListener(app.fetch));
} else {
  const { rateLimit } = await import('../../dist/http/index.js');
  const limiter = rateLimit(options);
  server = createServer(async (req, res) => {
    if (await limiter.handle(req, res)) res.end('ok');
  });
}
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${server.address().port}\n`));
