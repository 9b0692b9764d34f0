/**
 * A drain worker in a child process, SIGKILLed with a delivery in flight while more requests are
 * enqueued; then another worker process (another consumer name: XAUTOCLAIM), or the same one
 * restarted (its own pending entries), carries on. Every accepted request reaches the upstream, the
 * one in flight at the kill twice with the same key and no other twice; the queue's bound holds
 * throughout; the rate (held in Redis) holds across the crash. Runs against dist/ (`npm run build` first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createDeferredQueue } from '../../../src/gateway/defer/index.js';
import { stopProcess } from '../../support/redis.js';
import { eventually, startUpstream, type Upstream } from '../../support/defer-upstream.js';
import { useRedisWithClient } from '../../support/redis-topologies.js';

const WORKER = fileURLToPath(new URL('../../support/drain-worker.mjs', import.meta.url));
const PER_SECOND = 40;
const BOUND = 40;
const IN_FLIGHT = 12;

const shared = useRedisWithClient();
const server = shared.server;
const children: ChildProcess[] = [];
const upstreams: Upstream[] = [];

afterAll(async () => {
  await Promise.all(children.map((child) => stopProcess(child)));
  await Promise.all(upstreams.map((upstream) => upstream.close()));
});

/** Starts a worker process on `queueName` and resolves once it is ready. */
async function startWorker(queueName: string, consumer: string, upstream: Upstream, minIdleMs: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [WORKER, server.url, queueName, consumer, upstream.url, String(PER_SECOND), String(minIdleMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await eventually(() => output.includes('ready\n'), `worker ${consumer} ready`, 15_000);
  return child;
}

describe('a drain worker killed mid-drain', () => {
  it.each([
    // Another consumer name: the entry left pending is found once idle for minIdleMs (XAUTOCLAIM).
    ['another worker reclaims', 'second', 300],
    // The same name, and minIdleMs a minute: only re-reading its own pending entries can find it.
    ['the same worker restarted resumes', 'first', 60_000],
  ])('loses nothing: %s the entry in flight; each key delivered, the bound held, the rate kept', async (_case, restartAs, minIdleMs) => {
    const queueName = `crash-${restartAs}`;
    // The 13th delivery hangs: the worker is killed with it in flight.
    const upstream = await startUpstream((_request, index) => ({ status: 200, body: 'ok', delayMs: index === IN_FLIGHT ? 60_000 : 10 }));
    upstreams.push(upstream);
    const queue = createDeferredQueue({ redis: shared.redis, maxLength: BOUND });
    const accepted: string[] = [];
    const enqueue = async (from: number, count: number): Promise<void> => {
      const results = await Promise.all(Array.from({ length: count }, (_, i) => queue.enqueue(queueName, { method: 'POST', path: `/job/${from + i}`, body: `job ${from + i}` })));
      for (const result of results) if (result.accepted) accepted.push(result.ticket);
    };
    await enqueue(0, 30);
    let longest = 0;
    const sampler = setInterval(() => void queue.length(queueName).then((length) => (longest = Math.max(longest, length))), 10);
    try {
      const first = await startWorker(queueName, 'first', upstream, minIdleMs);
      await eventually(() => upstream.received.length === IN_FLIGHT + 1, 'the hanging delivery');
      await stopProcess(first); // SIGKILL
      expect(await shared.redis.call('XPENDING', `tollgate:defer:{${queueName}}:stream`, 'tollgate-drain', '-', '+', '10', 'first')).toHaveLength(1);
      // Meanwhile more arrive than the bound leaves room for.
      await enqueue(30, 30);
      // 12 delivered, 18 left (the one in flight among them): 22 more fit, 8 are refused.
      expect(await queue.length(queueName)).toBe(BOUND);
      expect(accepted).toHaveLength(30 + BOUND - (30 - IN_FLIGHT));
      await startWorker(queueName, restartAs, upstream, minIdleMs);
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
    expect(await queue.length(queueName)).toBe(0);
    // The rate is held in Redis, so it holds across the crash too: deliveries 1/40 s apart, network jitter aside.
    const gaps = upstream.received.slice(1).map((request, i) => request.at - upstream.received[i]!.at).sort((a, b) => a - b);
    expect(gaps[Math.floor(gaps.length / 2)]!).toBeGreaterThanOrEqual(1_000 / PER_SECOND - 5);
  }, 60_000);
});
