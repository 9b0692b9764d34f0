// The deferred queue (issue 16): enqueues per second, and drain-worker deliveries per second with
// admit always allowing, against a trivial upstream. No peer library does this job (a durable,
// bounded, rate-paced replay queue inside a rate limiter), so there is no side-by-side column.
//
//   npm run build && flock /tmp/tollgate-bench.lock node bench/deferred-queue.js [--repeats N] [--entries N]
//
// Starts its own redis-server and upstream (node:http answering 200 "ok", in a child process) on
// free loopback ports and kills them by PID at the end. Each repeat uses a fresh queue name.
//   enqueue/1    one enqueue in flight (sequential awaits), 256-byte bodies
//   enqueue/64   64 in flight
//   drain/1      one worker draining a pre-filled queue (one entry at a time, in order)
//   drain/2      two workers of the same group (order across them not kept)
// Medians of the repeats are printed as JSON.
import { Redis } from 'ioredis';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { freePort, startChild, stopChild, waitForPort } from './support/children.js';
import { removeRedisDirs, startRedisServer } from './support/redis.js';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer } from '../dist/gateway/defer/index.js';

const { values } = parseArgs({ options: { repeats: { type: 'string', default: '3' }, entries: { type: 'string', default: '5000' } } });
const REPEATS = Number(values.repeats);
const ENTRIES = Number(values.entries);
const BODY = Buffer.alloc(256, 'x');
const UPSTREAM = "require('node:http').createServer((q, s) => { q.resume(); q.on('end', () => s.end('ok')); }).listen(Number(process.argv[1]), '127.0.0.1')";

const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];

async function enqueueRate(queue, queueName, inFlight) {
  let next = 0;
  const start = performance.now();
  const lane = async () => {
    while (next < ENTRIES) {
      next++;
      const result = await queue.enqueue(queueName, { method: 'POST', path: '/job', headers: [['content-type', 'text/plain']], body: BODY });
      if (!result.accepted) throw new Error('queue full');
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return ENTRIES / ((performance.now() - start) / 1_000);
}

/**
 * Calls the worker makes to Redis so far (INFO commandstats): the commands it sends itself, not
 * those its scripts run inside Redis (commandstats counts both under the inner command's name, so
 * HSET, which the scripts run, is left out; the worker sends one itself only after a failed attempt).
 */
const WORKER_COMMANDS = /cmdstat_(evalsha|eval|xreadgroup|hmget|xautoclaim|xclaim|xgroup):calls=(\d+)/g;
async function commandsServed(redis) {
  const info = await redis.info('commandstats');
  return [...info.matchAll(WORKER_COMMANDS)].reduce((sum, match) => sum + Number(match[2]), 0);
}

async function drainRate(queue, queueName, workerCount, upstreamUrl) {
  const deliver = upstreamDeliverer(upstreamUrl);
  const commandsBefore = await commandsServed(queue.redis);
  const start = performance.now();
  const workers = Array.from({ length: workerCount }, (_, i) => startDrainWorker({
    queue, queueName, consumer: `w${i}`, blockMs: 50, admit: () => ({ allowed: true, retryAfterMs: 0 }), deliver,
  }));
  while ((await queue.length(queueName)) > 0) await sleep(5);
  const seconds = (performance.now() - start) / 1_000;
  await Promise.all(workers.map((worker) => worker.stop()));
  commandsPerDelivery.push(((await commandsServed(queue.redis)) - commandsBefore) / ENTRIES);
  return ENTRIES / seconds;
}

const redisServer = await startRedisServer('defer-redis');
const upstreamPort = await freePort();
const upstream = startChild('upstream', process.execPath, ['-e', UPSTREAM, String(upstreamPort)]);
await waitForPort(upstream, upstreamPort);
const redis = new Redis(redisServer.url);
const queue = createDeferredQueue({ redis, maxLength: ENTRIES * 2 });
const results = { 'enqueue/1': [], 'enqueue/64': [], 'drain/1': [], 'drain/2': [] };
const commandsPerDelivery = [];
try {
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const workers of [1, 2]) {
      const name = `bench-${repeat}-${workers}`;
      results[workers === 1 ? 'enqueue/1' : 'enqueue/64'].push(await enqueueRate(queue, name, workers === 1 ? 1 : 64));
      results[`drain/${workers}`].push(await drainRate(queue, name, workers, `http://127.0.0.1:${upstreamPort}`));
      await redis.flushall();
    }
  }
  const summary = Object.fromEntries(Object.entries(results).map(([name, rates]) => [name, { medianPerSecond: Math.round(median(rates)), runs: rates.map(Math.round) }]));
  const perDelivery = Number(median(commandsPerDelivery).toFixed(2));
  console.log(JSON.stringify({ entries: ENTRIES, repeats: REPEATS, bodyBytes: BODY.length, redisCallsPerDelivery: perDelivery, ...summary }, null, 2));
} finally {
  redis.disconnect();
  await stopChild(upstream);
  await stopChild(redisServer.child);
  removeRedisDirs();
}
