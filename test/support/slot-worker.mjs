// A separate OS process for the concurrency-slot tests, through the built package.
//   hammer <store JSON> <counter Redis URL> <key> <limit> <ms>: 8 loops acquire a slot of <key>,
//     hold it a few ms while counting themselves in a Redis counter (whose peak the script keeps),
//     release it, for <ms>; prints { granted, refused, failed } as JSON.
//   hold <store JSON> <key> <limit> <ttl>: takes <limit> slots, prints their permits as JSON, then
//     waits to be killed.
// <store JSON> is redisStore's options, or { "memcached": "host:port" } for a Memcached store.
import { Redis } from 'ioredis';
import { createLimiter, memcachedStore, redisStore } from '../../dist/index.js';

const [mode, storeJson, ...rest] = process.argv.slice(2);
const storeOptions = JSON.parse(storeJson);
const store = storeOptions.memcached === undefined ? redisStore(storeOptions) : memcachedStore({ servers: storeOptions.memcached });
await store.ready();
// What is measured is the store's exactness: a generous deadline keeps a loaded machine from answering locally.
const limiter = createLimiter({ store, deadlineMs: 10_000, failureMode: 'throw' });

// In one script, so the peak is exact: INCR the holders, keep the largest count seen.
const ENTER = "local n = redis.call('INCR', KEYS[1]) if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end return n";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

if (mode === 'hammer') {
  const [counterUrl, key, limitText, msText] = rest;
  const counter = new Redis(counterUrl);
  const stop = Date.now() + Number(msText);
  let granted = 0;
  let refused = 0;
  let failed = 0;
  const loop = async () => {
    while (Date.now() < stop) {
      try {
        const permit = await limiter.acquire(key, { limit: Number(limitText), ttl: '1m' });
        if (!permit.allowed) {
          refused += 1;
          await sleep(1);
          continue;
        }
        granted += 1;
        await counter.eval(ENTER, 2, `${key}:holders`, `${key}:peak`);
        await sleep(Math.random() * 3);
        await counter.decr(`${key}:holders`);
        await permit.release();
      } catch {
        failed += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, loop));
  counter.disconnect();
  await limiter.close();
  process.stdout.write(JSON.stringify({ granted, refused, failed }));
} else {
  const [key, limitText, ttl] = rest;
  const permits = [];
  for (let i = 0; i < Number(limitText); i++) permits.push(await limiter.acquire(key, { limit: Number(limitText), ttl }));
  process.stdout.write(`${JSON.stringify(permits.map(({ allowed, id, expiresAt }) => ({ allowed, id, expiresAt })))}\n`);
  setInterval(() => undefined, 60_000);
}
