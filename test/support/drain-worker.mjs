// One OS process running a drain worker through the built package, admitting at a rate held in
// Redis (so the rate holds across processes and crashes). Prints "ready" then one line per delivery;
// the parent kills it by PID (SIGKILL: a crash) or stops it with SIGTERM.
import { Redis } from 'ioredis';
import { createLimiter, redisStore } from '../../dist/index.js';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer } from '../../dist/gateway/defer/index.js';

const [redisUrl, queueName, consumer, upstreamUrl, perSecond, minIdleMs] = process.argv.slice(2);
const redis = new Redis(redisUrl);
const store = redisStore({ url: redisUrl, deadlineMs: 5_000 });
await store.ready();
const limiter = createLimiter({ store, deadlineMs: 5_000 });
const policy = { algorithm: 'gcra', limit: Number(perSecond), window: '1s', burst: 1 };
const worker = startDrainWorker({
  queue: createDeferredQueue({ redis }),
  queueName,
  consumer,
  minIdleMs: Number(minIdleMs),
  reclaimIntervalMs: 50,
  blockMs: 200,
  admit: async () => {
    const decision = await limiter.limit(`defer:${queueName}`, policy);
    return { allowed: decision.allowed, retryAfterMs: decision.retryAfter };
  },
  deliver: upstreamDeliverer(upstreamUrl, { timeoutMs: 5_000 }),
  hooks: { delivered: (_queue, ticket) => process.stdout.write(`delivered ${ticket}\n`) },
});
process.on('SIGTERM', async () => {
  await worker.stop();
  await store.close();
  redis.disconnect();
});
process.stdout.write('ready\n');
