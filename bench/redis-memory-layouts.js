// What a stored layout costs in Redis used_memory per key, before changing any code: 1M keys of
// each candidate (key name, value) written by a Lua loop with the same TTL (PX one day), on a
// private redis-server (started here on a free loopback port, no persistence, stopped by its PID).
// For deciding issue 15's memory target: which of "shorter key tags", "one integer of state" and
// "integer-encoded values" moves the figure on this Redis and allocator.
//
//   node bench/redis-memory-layouts.js [--keys 1000000]
//
// Writes bench/results/redis-memory-layouts.json and prints bytes per key for each layout.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import { freePort } from './support/children.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const Redis = require('ioredis');
const argv = process.argv.slice(2);
const KEYS = argv.includes('--keys') ? Number(argv[argv.indexOf('--keys') + 1]) : 1_000_000;

const FILL = `for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  redis.call('SET', string.format(ARGV[3], i), ARGV[4], 'PX', 86400000)
end
return 1`;

/** [key pattern (%d = 0 … keys − 1), value]: today's layouts, then the candidates. */
const LAYOUTS = {
  'fixed-window today: tollgate:{user:N}:fw:1d = "1 20419"': ['tollgate:{user:%d}:fw:1d', '1 20419'],
  'fixed-window, count only: tollgate:{user:N}:fw:1d = 1': ['tollgate:{user:%d}:fw:1d', '1'],
  'fixed-window, count only, shorter key: tg:{user:N}fw1d = 1': ['tg:{user:%d}fw1d', '1'],
  'gcra today: tollgate:{user:N}:gcra:1d = "1795742939550 0"': ['tollgate:{user:%d}:gcra:1d', '1795742939550 0'],
  'gcra, one timestamp: tollgate:{user:N}:gcra:1d = 1795742939550': ['tollgate:{user:%d}:gcra:1d', '1795742939550'],
  'gcra, one timestamp, shorter key: tg:{user:N}g1d = 1795742939550': ['tg:{user:%d}g1d', '1795742939550'],
  'rate-limiter-flexible: rlflx:user:N = 1': ['rlflx:user:%d', '1'],
};

const port = await freePort();
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
process.on('exit', () => server.exitCode === null && process.kill(server.pid, 'SIGTERM'));
let client;
for (let attempt = 0; client === undefined; attempt++) {
  await sleep(100);
  const candidate = new Redis({ port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  candidate.on('error', () => {});
  try {
    await candidate.connect();
    client = candidate;
  } catch (error) {
    candidate.disconnect();
    if (attempt === 50) throw error;
  }
}
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await client.info('memory'))[1]);
const results = {};
for (const [name, [pattern, value]] of Object.entries(LAYOUTS)) {
  await client.flushall('SYNC');
  await sleep(500);
  const before = await usedMemory();
  for (let i = 0; i < KEYS; i += 20_000) await client.eval(FILL, 0, i, Math.min(KEYS, i + 20_000) - 1, pattern, value);
  await sleep(1_500); // let serverCron finish incremental rehashing
  const sample = pattern.replace('%d', '123456');
  results[name] = {
    bytesPerKey: +(((await usedMemory()) - before) / (await client.dbsize())).toFixed(1),
    encoding: await client.object('ENCODING', sample),
    memoryUsage: await client.memory('USAGE', sample, 'SAMPLES', 0),
  };
  console.log(`${name.padEnd(72)} ${results[name].bytesPerKey} B/key (${results[name].encoding})`);
}
const version = /redis_version:(\S+)/.exec(await client.info('server'))[1];
client.disconnect();
mkdirSync(join(HERE, 'results'), { recursive: true });
writeFileSync(join(HERE, 'results', 'redis-memory-layouts.json'), `${JSON.stringify({ date: new Date().toISOString(), redis: version, keys: KEYS, results }, null, 2)}\n`);
process.exit(0);
