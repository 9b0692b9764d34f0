// rate-limiter-flexible's blockDuration: 3 login attempts a minute, then blocked for 15 minutes.
import { createServer } from 'node:http';
import { createLimiter, memoryStore } from 'tollgate';

// new RateLimiterMemory({ points: 3, duration: 60, blockDuration: 15 * 60 })
const limiter = createLimiter({ store: memoryStore() });
const attempts = { algorithm: 'sliding-log', limit: 3, window: '1m' };
const block = { algorithm: 'sliding-log', limit: 1, window: '15m' }; // one entry = blocked until it is 15 minutes old

async function attempt(ip) {
  const blocked = await limiter.look(`block:${ip}`, block);
  if (blocked.remaining === 0) return { allowed: false, retryAfter: blocked.resetAt - blocked.now };
  const d = await limiter.limit(`login:${ip}`, attempts);
  if (d.allowed) return d;
  const started = await limiter.limit(`block:${ip}`, block); // the attempt over the limit starts the block
  return { allowed: false, retryAfter: started.resetAt - started.now };
}

createServer(async (req, res) => {
  const d = await attempt(req.socket.remoteAddress);
  if (!d.allowed) return void res.writeHead(429, { 'retry-after': Math.ceil(d.retryAfter / 1000) }).end('blocked\n');
  res.end('checking your password\n');
}).listen(Number(process.env.PORT ?? 3000), function () {
  console.log(`listening on ${this.address().port}`);
});
