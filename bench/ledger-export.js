// A usage ledger of 100,000 keys: how long its export takes and how much memory the exporting
// process grows by (it must stream, never hold the period), on one Redis and on the memory store;
// and what the ledger costs per key and period in bytes (Redis MEMORY USAGE; the memory store's heap).
//
//   npm run build && node --expose-gc bench/ledger-export.js [--keys 100000] [--repeats 3]
//
// Every sample is written to bench/results/ledger-export.json. It starts its own redis-server (no
// persistence) and kills it by PID at the end. Redis: the parent seeds the month's ledger with
// `keys` admitted decisions (64 in flight) through the library, once without request ids and once
// (another key prefix) with one request id per key; each export is a fresh forked process that
// reads the whole period through `limiter.ledger.export()`, writing each row as a JSON line to a
// sink that drops it, while sampling its RSS every 10 ms: time, rows, RSS growth over the
// process's RSS before the export (peak − before), and the live heap's growth (heapUsed after a
// full gc every 10,000 rows, so `node --expose-gc`). Memory store: a fresh process seeds `keys`
// decisions, measures its heap growth (after gc) and then exports. Medians of `repeats`.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { stopChild } from './support/children.js';
import { forkedEntry, median, runForked as runChild } from './support/forked.js';
import { removeRedisDirs, startRedisServer } from './support/redis.js';

const SCRIPT = fileURLToPath(import.meta.url);
const POLICY = { algorithm: 'fixed-window', limit: 1_000_000_000, window: 'month', ledger: { keep: 13 } };
const flag = (name, fallback) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(process.argv[index + 1]);
};

/** `count` admitted decisions on keys user:0.. (64 in flight), each with a request id if `ids`. */
async function seed(limiter, count, ids) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const decision = await limiter.limit(`user:${i}`, POLICY, ids ? { requestId: `req-${i}` } : undefined);
      if (!decision.allowed || decision.reason !== undefined) throw new Error(`seed ${i}: ${JSON.stringify(decision)}`);
    }
  };
  await Promise.all(Array.from({ length: 64 }, worker));
  const stats = limiter.ledger.stats();
  if (stats.counted !== count) throw new Error(`seeded ${stats.counted} of ${count}: ${JSON.stringify(stats)}`);
}

/** Exports the month, sampling RSS; the rows go to a sink that drops them. */
async function exportPeriod(limiter, period) {
  globalThis.gc?.();
  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  const started = performance.now();
  let rows = 0;
  let bytes = 0;
  // The live heap (after a full gc) every 10,000 rows: what the export holds, apart from garbage not yet collected.
  const heapBefore = process.memoryUsage().heapUsed;
  let liveHeapGrowth = 0;
  for await (const row of limiter.ledger.export({ period })) {
    bytes += JSON.stringify(row).length + 1;
    rows += 1;
    if (rows % 10_000 === 0) {
      globalThis.gc();
      liveHeapGrowth = Math.max(liveHeapGrowth, process.memoryUsage().heapUsed - heapBefore);
    }
  }
  const ms = performance.now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  return { rows, ms, bytes, rssBeforeMb: before / 2 ** 20, rssGrowthMb: (peak - before) / 2 ** 20, liveHeapGrowthMb: liveHeapGrowth / 2 ** 20 };
}

async function measure({ subject, port, keys, period, prefix }) {
  const { createLimiter, memoryStore, redisStore } = await import('../dist/index.js');
  if (subject === 'redis') {
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, keyPrefix: prefix });
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const result = await exportPeriod(limiter, period);
    await limiter.close();
    return result;
  }
  const limiter = createLimiter({ store: memoryStore({ maxLedgerKeys: keys, sweepIntervalMs: 0 }) });
  globalThis.gc();
  const heapBefore = process.memoryUsage().heapUsed;
  await seed(limiter, keys, subject === 'memory ids');
  globalThis.gc();
  // The store's counters are in it too: this is the ledger and the decisions' state together; the
  // plain subject's figure, subtracted in main(), leaves the ids' share.
  const heapPerKey = (process.memoryUsage().heapUsed - heapBefore) / keys;
  return { ...(await exportPeriod(limiter, period)), heapPerKey };
}

/** Sum of MEMORY USAGE over the ledger's Redis keys under `prefix` (SCAN, then pipelined), and how many there are. */
async function ledgerBytes(url, prefix) {
  const { Redis } = await import('ioredis');
  const client = new Redis(url);
  let cursor = '0';
  let bytes = 0;
  let count = 0;
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}{%L*`, 'COUNT', 1000);
    cursor = next;
    const pipeline = client.pipeline();
    for (const key of keys) pipeline.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
    for (const [error, size] of (await pipeline.exec()) ?? []) {
      if (error) throw error;
      bytes += Number(size);
      count += 1;
    }
  } while (cursor !== '0');
  client.disconnect();
  return { bytes, count };
}

async function main() {
  const keys = flag('keys', 100_000);
  const repeats = flag('repeats', 3);
  const { createLimiter, redisStore } = await import('../dist/index.js');
  const redis = await startRedisServer('ledger-export-redis');
  const period = new Date().toISOString().slice(0, 7);
  const results = {};
  const sizes = {};
  try {
    for (const [prefix, ids] of [['plain:', false], ['ids:', true]]) {
      const store = redisStore({ url: redis.url, keyPrefix: prefix });
      await store.ready();
      const limiter = createLimiter({ store, deadlineMs: 10_000 });
      const started = performance.now();
      await seed(limiter, keys, ids);
      console.error(`seeded ${keys} keys (${prefix}) in ${Math.round(performance.now() - started)} ms`);
      await limiter.close();
      sizes[prefix] = await ledgerBytes(redis.url, prefix);
    }
    const subjects = [{ subject: 'redis', prefix: 'plain:' }, { subject: 'memory' }, { subject: 'memory ids' }];
    for (let round = 0; round < repeats; round++) {
      for (const spec of round % 2 === 0 ? subjects : [...subjects].reverse()) {
        const result = await runChild(SCRIPT, { ...spec, port: redis.port, keys, period });
        if (result.rows !== keys) throw new Error(`${spec.subject} exported ${result.rows} rows of ${keys}`);
        (results[spec.subject] ??= []).push(result);
        console.error(`round ${round + 1} ${spec.subject}: ${Math.round(result.ms)} ms, RSS +${result.rssGrowthMb.toFixed(1)} MB`);
      }
    }
  } finally {
    await stopChild(redis.child);
    removeRedisDirs();
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const info = { nproc: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, commit, date: new Date().toISOString() };
  writeFileSync(new URL('./results/ledger-export.json', import.meta.url), `${JSON.stringify({ info, options: { keys, repeats, policy: POLICY }, sizes, samples: results }, null, 1)}\n`);
  console.log(`${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}, ${keys} keys, ${repeats} repeats; medians\n`);
  console.log('| store | export ms | rows/s | RSS before MB | RSS growth MB | live heap growth MB | JSONL MB |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const [name, runs] of Object.entries(results)) {
    const ms = median(runs.map((r) => r.ms));
    const cell = (field) => median(runs.map((r) => r[field])).toFixed(1);
    console.log(`| ${name} | ${Math.round(ms)} | ${Math.round((keys / ms) * 1000).toLocaleString('en')} | ${cell('rssBeforeMb')} | ${cell('rssGrowthMb')} | ${cell('liveHeapGrowthMb')} | ${(median(runs.map((r) => r.bytes)) / 2 ** 20).toFixed(1)} |`);
  }
  const heap = (name) => median(results[name].map((r) => r.heapPerKey));
  console.log('\n| bytes per key and period | Redis (MEMORY USAGE) | memory store (heap, with the decision state) |');
  console.log('|---|---:|---:|');
  console.log(`| without request ids | ${(sizes['plain:'].bytes / keys).toFixed(0)} (${sizes['plain:'].count} Redis keys) | ${heap('memory').toFixed(0)} |`);
  console.log(`| with one request id | ${(sizes['ids:'].bytes / keys).toFixed(0)} (${sizes['ids:'].count} Redis keys) | ${heap('memory ids').toFixed(0)} |`);
}

forkedEntry(measure, main);
