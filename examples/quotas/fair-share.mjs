// Fair shares of one capacity (docs/quotas.md, section 5): two customers share 40 requests a
// minute, acme with weight 3, globex with weight 1. Memory store by default; REDIS_URL for Redis.
import { createLimiter, memoryStore, redisStore } from 'tollgate';

const store = process.env.REDIS_URL ? redisStore({ url: process.env.REDIS_URL }) : memoryStore();
const limiter = createLimiter({ store });
const group = `partners-${process.pid}`;
const policies = {
  acme: { algorithm: 'fixed-window', limit: 40, window: '1m', share: { group, weight: 3 } },
  globex: { algorithm: 'fixed-window', limit: 40, window: '1m', share: { group, weight: 1 } },
};

/** Each customer in `who` sends `count` requests, taking turns, at `now`; how many each had admitted. */
async function demand(who, count, now) {
  const admitted = Object.fromEntries(who.map((name) => [name, 0]));
  for (let i = 0; i < count; i++) {
    for (const name of who) if ((await limiter.limit(name, policies[name], { now })).allowed) admitted[name] += 1;
  }
  return admitted;
}

const minute = 60_000;
const start = Math.floor(Date.now() / minute) * minute;
const both = await demand(['acme', 'globex'], 100, start + 1);
console.log(`minute 1, both sending 100: acme ${both.acme}, globex ${both.globex}`);
const quiet = await demand(['acme'], 100, start + minute + 1);
console.log(`minute 2, globex quiet (still active: it asked last minute): acme ${quiet.acme}`);
const idle = await demand(['acme'], 100, start + 2 * minute + 1);
console.log(`minute 3, globex idle: acme ${idle.acme}`);
const look = await limiter.peek('globex', policies.globex, { now: start + 2 * minute + 2 });
console.log(`globex now: limit ${look.limit}, remaining ${look.remaining}, allowed ${look.allowed}`);
await limiter.close();
