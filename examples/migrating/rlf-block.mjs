// rate-limiter-flexible's blockDuration: 3 login attempts a minute, then blocked for 15 minutes.
import { createServer } from 'node:http';
import { createLimiter, memoryStore } from 'tollgate';

// new RateLimiterMemory({ points: 3, duration: 60, blockDuration: 15 * 60 })
const limiter = createLimiter({ store: memoryStore() });
const attempts = { algorithm: 'sliding-log', limit: 3, window: '1m', blockDuration: '15m' };

createServer(async (req, res) => {
  // The attempt over the limit starts the block; until it ends every attempt answers reason 'blocked'.
  const d = await limiter.limit(`login:${req.socket.remoteAddress}`, attempts);
  if (!d.allowed) return void res.writeHead(429, { 'retry-after': Math.ceil(d.retryAfter / 1000) }).end(`${d.reason ?? 'limited'}\n`);
  res.end('checking your password\n');
}).listen(Number(process.env.PORT ?? 3000), function () {
  console.log(`listening on ${this.address().port}`);
});
