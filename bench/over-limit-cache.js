// A hot denied key (an attacker hammering one key far past its limit) on Redis: Tollgate without
// and with its local over-limit cache, beside rate-limiter-flexible's RateLimiterRedis without and
// with its in-memory block (inMemoryBlockOnConsumed), in one run.
//
//   npm run build && node bench/over-limit-cache.js [--rounds N] [--duration MS]
//
// Starts its own redis-server on a free loopback port (no persistence) and kills it by its PID at
// the end. Each subject: its limit (10 a minute) is spent first, then 64 workers in this process
// call it on the same key in a loop for --duration ms. Reported: decisions/s, Redis script calls
// per 1,000 decisions (INFO commandstats, reset before each run), medians over --rounds rounds that
// alternate the subjects' order.
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createLimiter, redisStore } from '../dist/index.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, duration: { type: 'string', default: '3000' } } });
const ROUNDS = Number(values.rounds);
const DURATION_MS = Number(values.duration);
const WORKERS = 64;
const LIMIT = 10;

async function freePort() {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const port = await freePort();
const redisProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
const cli = (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout;
while (cli('PING').trim() !== 'PONG') await sleep(20);

/** Every subject: `decide(key)` resolves to whether the request was admitted. */
async function subjects() {
  const store = redisStore({ url: `redis://127.0.0.1:${port}`, deadlineMs: 5_000 });
  await store.ready();
  const policy = { algorithm: 'fixed-window', limit: LIMIT, window: '1m' };
  const plain = createLimiter({ store, deadlineMs: 5_000 });
  const cached = createLimiter({ store, deadlineMs: 5_000, overLimitCache: true });
  const client = new Redis({ port, enableOfflineQueue: true });
  const rlf = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: 60, keyPrefix: 'rlf' });
  const rlfBlock = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: 60, keyPrefix: 'rlfb', inMemoryBlockOnConsumed: LIMIT + 1, inMemoryBlockDuration: 60 });
  const rlfDecide = (limiter) => (key) => limiter.consume(key).then(() => true, (res) => { if (res instanceof Error) throw res; return false; });
  return {
    list: [
      ['tollgate', (key) => plain.limit(key, policy).then((d) => d.allowed)],
      ['tollgate + overLimitCache', (key) => cached.limit(key, policy).then((d) => d.allowed)],
      ['rate-limiter-flexible', rlfDecide(rlf)],
      ['rate-limiter-flexible + inMemoryBlockOnConsumed', rlfDecide(rlfBlock)],
    ],
    close: async () => {
      await store.close();
      client.disconnect();
    },
  };
}

const scriptCalls = () => {
  const text = cli('INFO', 'commandstats');
  let calls = 0;
  for (const match of text.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(match[1]);
  return calls;
};

async function measure(name, decide, round) {
  const key = `hot:${round}:${name}`;
  let admitted = 0;
  for (let i = 0; i < LIMIT + 5; i++) if (await decide(key)) admitted += 1;
  if (admitted !== LIMIT) throw new Error(`${name}: admitted ${admitted} of ${LIMIT} while spending the limit`);
  cli('CONFIG', 'RESETSTAT');
  let decisions = 0;
  let stray = 0;
  const end = performance.now() + DURATION_MS;
  const worker = async () => {
    while (performance.now() < end) {
      if (await decide(key)) stray += 1;
      decisions += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: WORKERS }, worker));
  const seconds = (performance.now() - started) / 1000;
  if (stray > 0) throw new Error(`${name}: admitted ${stray} past the limit`);
  return { rate: decisions / seconds, scriptsPer1000: (scriptCalls() / decisions) * 1000 };
}

const { list, close } = await subjects();
const results = new Map(list.map(([name]) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? list : [...list].reverse();
  for (const [name, decide] of order) results.get(name).push(await measure(name, decide, round));
}
await close();
redisProcess.kill('SIGKILL');

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(results.get('tollgate').map((r) => r.rate));
const peer = median(results.get('rate-limiter-flexible').map((r) => r.rate));
console.log(`hot denied key, ${WORKERS} in flight, ${DURATION_MS} ms x ${ROUNDS} rounds; ${cpus().length} CPUs (${cpus()[0]?.model}); Node ${process.version}`);
console.log('| subject | decisions/s (median) | × tollgate | × rate-limiter-flexible | Redis script calls per 1,000 decisions |');
console.log('| --- | --- | --- | --- | --- |');
for (const [name, runs] of results) {
  const rate = median(runs.map((r) => r.rate));
  const scripts = median(runs.map((r) => r.scriptsPer1000));
  console.log(`| ${name} | ${Math.round(rate).toLocaleString('en-US')} | ${(rate / base).toFixed(2)} | ${(rate / peer).toFixed(2)} | ${scripts.toFixed(scripts < 1 ? 3 : 1)} |`);
}
