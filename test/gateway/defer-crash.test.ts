/**
 * A drain worker in a child process, SIGKILLed mid-drain while more requests are being enqueued; a
 * second worker (another process, another consumer name) reclaims what the first left pending.
 * Every accepted request reaches the upstream; each idempotency key at least once and at most one
 * extra delivery in all (the one in flight at the kill, again with its key); the queue's bound holds throughout; the
 * rate (held in Redis) holds across the crash. Runs against dist/ (`npm run build` first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeferredQueue } from '../../src/gateway/defer/index.js';
import { startRedis, stopProcess, type RedisServer } from '../support/redis.js';
import { eventually, startUpstream, type Upstream } from '../support/defer-upstream.js';

const WORKER = fileURLToPath(new URL('../support/drain-worker.mjs', import.meta.url));
const PER_SECOND = 40;
const BOUND = 40;
const IN_FLIGHT = 12;

let server: RedisServer;
let redis: Redis;
let upstream: Upstream;
const children: ChildProcess[] = [];

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  // The 13th delivery hangs: the worker is killed with it in flight.
  upstream = await startUpstream((_request, index) => ({ status: 200, body: 'ok', delayMs: index === IN_FLIGHT ? 60_000 : 10 }));
}, 20_000);

afterAll(async () => {
  await Promise.all(children.map((child) => stopProcess(child)));
  await upstream?.close();
  redis?.disconnect();
  await server?.stop();
});

/** Starts a worker process and resolves once it is ready; `deliveries` counts the lines it printed. */
async function startWorker(consumer: string, minIdleMs: number): Promise<{ child: ChildProcess; deliveries: () => number }> {
  const child = spawn(process.execPath, [WORKER, server.url, 'crash', consumer, upstream.url, String(PER_SECOND), String(minIdleMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await eventually(() => output.includes('ready\n'), `worker ${consumer} ready`, 15_000);
  return { child, deliveries: () => output.split('\n').filter((line) => line.startsWith('delivered ')).length };
}

describe('a drain worker killed mid-drain', () => {
  it('loses nothing: another worker reclaims its pending entry, each key delivered, the bound held', async () => {
    const queue = createDeferredQueue({ redis, maxLength: BOUND });
    const accepted: string[] = [];
    const enqueue = async (from: number, count: number): Promise<void> => {
      const results = await Promise.all(Array.from({ length: count }, (_, i) => queue.enqueue('crash', { method: 'POST', path: `/job/${from + i}`, body: `job ${from + i}` })));
      for (const result of results) if (result.accepted) accepted.push(result.ticket);
    };
    await enqueue(0, 30);
    let longest = 0;
    const sampler = setInterval(() => void queue.length('crash').then((length) => (longest = Math.max(longest, length))), 10);
    try {
      const first = await startWorker('first', 60_000);
      await eventually(() => upstream.received.length === IN_FLIGHT + 1, 'the hanging delivery');
      await stopProcess(first.child); // SIGKILL
      expect(await redis.call('XPENDING', 'tollgate:defer:{crash}:stream', 'tollgate-drain', '-', '+', '10', 'first')).toHaveLength(1);
      // Meanwhile more arrive than the bound leaves room for.
      await enqueue(30, 30);
      // 12 delivered, 18 left (the one in flight among them): 22 more fit, 8 are refused.
      expect(await queue.length('crash')).toBe(BOUND);
      expect(accepted).toHaveLength(30 + BOUND - (30 - IN_FLIGHT));
      await startWorker('second', 300);
      await eventually(async () => (await Promise.all(accepted.map((ticket) => queue.status(ticket)))).every((status) => status.state === 'delivered'), 'every accepted ticket delivered', 20_000);
    } finally {
      clearInterval(sampler);
    }
    const keys = upstream.keys();
    expect(new Set(keys)).toEqual(new Set(accepted));
    // The one in flight at the kill reached the upstream twice, with the same key; nothing else did.
    expect(keys.length).toBe(accepted.length + 1);
    expect(keys.filter((key) => key === keys[IN_FLIGHT])).toHaveLength(2);
    expect(longest).toBeLessThanOrEqual(BOUND);
    expect(await queue.length('crash')).toBe(0);
    // The rate is held in Redis, so it holds across the crash too: deliveries 1/40 s apart, network jitter aside.
    const gaps = upstream.received.slice(1).map((request, i) => request.at - upstream.received[i]!.at).sort((a, b) => a - b);
    expect(gaps[Math.floor(gaps.length / 2)]!).toBeGreaterThanOrEqual(1_000 / PER_SECOND - 5);
  }, 60_000);
});
