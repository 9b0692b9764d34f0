// rate-limiter-flexible's insuranceLimiter: decide on Redis, and on a memory store while Redis fails.
import { createServer } from 'node:http';
import { createLimiter, memoryStore, redisStore } from 'tollgate';

const shared = createLimiter({ store: redisStore({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', commandTimeoutMs: 200 }) });
const local = createLimiter({ store: memoryStore() });
const policy = { algorithm: 'gcra', limit: 100, window: '1m' };
const localPolicy = { algorithm: 'gcra', limit: 25, window: '1m' }; // this process's share, e.g. 1/4 with 4 processes

async function decide(key) {
  try {
    return { via: 'redis', ...(await shared.limit(key, policy)) };
  } catch (error) {
    // Only a store failure falls back; a denial is a normal answer, never an error.
    if (error.code !== 'ERR_TOLLGATE_STORE_UNAVAILABLE' && error.code !== 'ERR_TOLLGATE_STORE_ERROR') throw error;
    return { via: 'memory', ...(await local.limit(key, localPolicy)) };
  }
}

createServer(async (req, res) => {
  const d = await decide(`ip:${req.socket.remoteAddress}`);
  res.setHeader('x-decided-by', d.via);
  if (!d.allowed) return void res.writeHead(429, { 'retry-after': Math.ceil(d.retryAfter / 1000) }).end();
  res.end('hello\n');
}).listen(Number(process.env.PORT ?? 3000), function () {
  console.log(`listening on ${this.address().port}`);
});
