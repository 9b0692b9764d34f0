// rate-limiter-flexible's consume / get / delete / penalty on Tollgate's limiter, over node:http.
import { createServer } from 'node:http';
import { createLimiter, redisStore } from 'tollgate';

// new RateLimiterRedis({ storeClient: redis, keyPrefix: 'search', points: 10, duration: 60 })
const limiter = createLimiter({ store: redisStore({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }) });
const policy = { algorithm: 'token-bucket', limit: 10, window: '1m' };

/** RateLimiterRes's fields, from a Tollgate decision. */
function asRateLimiterRes(d) {
  return { remainingPoints: d.remaining, msBeforeNext: d.allowed ? d.resetAt - d.now : d.retryAfter, consumedPoints: d.limit - d.remaining };
}

createServer(async (req, res) => {
  const url = new URL(req.url, 'http://localhost');
  const key = `search:${req.socket.remoteAddress}`;
  const points = Number(url.searchParams.get('points') ?? 1);
  let status = 200;
  let d;
  if (req.method === 'GET' && url.pathname === '/search') {
    d = await limiter.limit(key, policy, { cost: points }); // consume(key, points): resolves even when denied
    if (!d.allowed) status = 429; // where consume() would reject with a RateLimiterRes
  } else if (req.method === 'GET' && url.pathname === '/quota') {
    d = await limiter.look(key, policy); // get(key): never null, spends nothing
  } else if (req.method === 'DELETE' && url.pathname === '/quota') {
    await limiter.reset(key, policy); // delete(key)
    d = await limiter.look(key, policy);
  } else if (req.method === 'POST' && url.pathname === '/penalty') {
    // penalty(key, points): no such call; spend what is left, up to points (two calls, not atomic)
    const { remaining } = await limiter.look(key, policy);
    if (remaining > 0) await limiter.limit(key, policy, { cost: Math.min(points, remaining) });
    d = await limiter.look(key, policy);
  } else {
    return void res.writeHead(404).end();
  }
  if (!d.allowed) res.setHeader('retry-after', Math.ceil(d.retryAfter / 1000));
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(asRateLimiterRes(d)));
}).listen(Number(process.env.PORT ?? 3000), function () {
  console.log(`listening on ${this.address().port}`);
});
