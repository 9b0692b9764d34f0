// Throttled requests kept instead of dropped: three orders are deferred, a drain worker replays them
// to the upstream at 2 per second (the rate a Tollgate limiter allows), and each result is read back
// by its ticket. Needs a Redis: REDIS_URL (default redis://127.0.0.1:6379). Run: node examples/deferred/drain.mjs
import { createServer } from 'node:http';
import { Redis } from 'ioredis';
import { createLimiter } from 'tollgate';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer } from 'tollgate/deferred';

// The service behind the gateway: it sees each order once per attempt, with the same Idempotency-Key.
const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(201, { 'content-type': 'text/plain' }).end(`processed ${req.url}`));
});
await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const queue = createDeferredQueue({ redis, maxLength: 100 });
const queueName = `orders-${process.pid}`;

// What the gateway does with a request its rule throttled: keep it, answer 202 with the ticket.
const tickets = [];
for (let i = 0; i < 3; i++) {
  const result = await queue.enqueue(queueName, { method: 'POST', path: `/orders/${i}`, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ item: i }) });
  if (!result.accepted) throw new Error('the queue is full: answer 429');
  tickets.push(result.ticket);
  console.log(`order ${i}: queued at position ${result.position}`);
}

// The drain worker asks the limiter before each delivery: 2 per second, one at a time.
const limiter = createLimiter();
const policy = { algorithm: 'gcra', limit: 2, window: '1s', burst: 1 };
const worker = startDrainWorker({
  queue,
  queueName,
  consumer: 'example',
  admit: async () => {
    const decision = await limiter.limit(`defer:${queueName}`, policy);
    return { allowed: decision.allowed, retryAfterMs: decision.retryAfter };
  },
  deliver: upstreamDeliverer(`http://127.0.0.1:${upstream.address().port}`),
});

// What a client polling its status URL sees once the work is done.
for (const [i, ticket] of tickets.entries()) {
  let status = await queue.status(ticket);
  while (status.state === 'queued' || status.state === 'delivering') {
    await new Promise((resolve) => setTimeout(resolve, 50));
    status = await queue.status(ticket);
  }
  console.log(`order ${i}: ${status.state} ${status.status} "${status.body}" after ${status.attempts} attempt(s)`);
}

await worker.stop();
upstream.close();
redis.disconnect();
