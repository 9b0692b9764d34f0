// A separate OS process for the penalty tests: one decision on one key through the built package,
// at an explicit `now`, printed as JSON. <url> is a Redis URL, or memcached:<host:port>.
import { createLimiter, memcachedStore, redisStore } from '../../dist/index.js';

const [url, policyJson, key, nowText] = process.argv.slice(2);
const store = url.startsWith('memcached:') ? memcachedStore({ servers: url.slice('memcached:'.length) }) : redisStore({ url });
await store.ready();
const limiter = createLimiter({ store, deadlineMs: 10_000 });
const decision = await limiter.limit(key, JSON.parse(policyJson), { now: Number(nowText) });
await limiter.close();
process.stdout.write(JSON.stringify(decision));
