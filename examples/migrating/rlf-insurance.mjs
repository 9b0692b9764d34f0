// rate-limiter-flexible's insuranceLimiter: decide on Redis, and in this process while Redis fails.
import { createServer } from 'node:http';
import { createLimiter, redisStore } from 'tollgate';

const limiter = createLimiter({
  store: redisStore({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }),
  failureMode: 'local', // the default, written out: while Redis fails, each process enforces its share
  expectedNodes: 4, // ... here 1/4 of the limit, with 4 processes behind the load balancer
});
const policy = { algorithm: 'gcra', limit: 100, window: '1m' };

createServer(async (req, res) => {
  const d = await limiter.limit(`ip:${req.socket.remoteAddress}`, policy);
  res.setHeader('x-decided-by', d.reason === 'local-fallback' ? 'memory' : 'redis');
  if (!d.allowed) return void res.writeHead(429, { 'retry-after': Math.ceil(d.retryAfter / 1000) }).end();
  res.end('hello\n');
}).listen(Number(process.env.PORT ?? 3000), function () {
  console.log(`listening on ${this.address().port}`);
});
