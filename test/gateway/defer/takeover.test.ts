/**
 * Two drain workers on one queue, on a real redis-server, against a real node:http upstream: worker
 * A holds an entry while waiting for admission, its link to Redis is cut for longer than minIdleMs,
 * and worker B takes the entry over (XAUTOCLAIM). When A's link comes back, its heartbeat used to
 * re-take the entry (`XCLAIM … 0` always succeeds), and both workers delivered it. Now the heartbeat
 * resets the idle time only of an entry A still holds, A gives the entry up, and the begin script
 * refuses an attempt by a worker that does not hold the entry: it is delivered once.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer, type DrainWorker, type DrainWorkerOptions } from '../../../src/gateway/defer/index.js';
import { eventually, startUpstream, type Upstream } from '../../support/defer-upstream.js';
import { startDelayProxy, type DelayProxy } from '../../support/delay-proxy.js';
import { useRedisWithClient } from '../../support/redis-topologies.js';

const shared = useRedisWithClient();
const MIN_IDLE_MS = 300;
const open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((closable) => closable.close()));
});

/** The entry pending in `stream` and the consumer it is pending on, as Redis says. */
async function pendingEntry(stream: string): Promise<{ id: string; consumer: string } | undefined> {
  // Before the first worker made the group, there is none (NOGROUP).
  const pending = (await shared.redis.call('XPENDING', stream, 'tollgate-drain', '-', '+', '1').catch(() => [])) as [string, string, number, number][];
  return pending[0] === undefined ? undefined : { id: pending[0][0], consumer: pending[0][1] };
}

async function owner(stream: string): Promise<string | undefined> {
  return (await pendingEntry(stream))?.consumer;
}

describe('a worker silent past minIdleMs, whose entry another worker took over', () => {
  it('gives the entry up when it comes back: the entry reaches the upstream once', async () => {
    // Slow answers: two deliveries begun a few ms apart would both reach the upstream.
    const upstream: Upstream = await startUpstream(() => ({ status: 200, body: 'ok', delayMs: 300 }));
    const link: DelayProxy = await startDelayProxy(shared.server.port, 0);
    const viaLink = new Redis(link.url);
    viaLink.on('error', () => undefined);
    open.push(upstream, link, { close: async () => viaLink.disconnect() });
    const queueName = 'takeover';
    const stream = `tollgate:defer:{${queueName}}:stream`;
    let admitting = false;
    const lost: string[] = [];
    const workers: DrainWorker[] = [];
    const start = (consumer: string, redis: Redis, hooks: DrainWorkerOptions['hooks'] = {}): void => {
      workers.push(startDrainWorker({
        queue: createDeferredQueue({ redis }),
        queueName,
        consumer,
        minIdleMs: MIN_IDLE_MS,
        reclaimIntervalMs: 50,
        blockMs: 100,
        admit: () => (admitting ? { allowed: true, retryAfterMs: 0 } : { allowed: false, retryAfterMs: 20 }),
        deliver: upstreamDeliverer(upstream.url),
        hooks,
      }));
    };
    open.push({ close: async () => void (await Promise.all(workers.map((worker) => worker.stop()))) });

    const queue = createDeferredQueue({ redis: shared.redis });
    const enqueued = await queue.enqueue(queueName, { method: 'POST', path: '/once', body: 'pay once' });
    if (!enqueued.accepted) throw new Error('refused');
    start('A', viaLink, { lost: (_queue, id) => lost.push(id) });
    await eventually(async () => (await owner(stream)) === 'A', 'A to hold the entry');
    const { id } = (await pendingEntry(stream))!;

    // A's link to Redis goes down: its heartbeats stop reaching Redis, the entry goes idle.
    link.cut();
    start('B', shared.redis);
    await eventually(async () => (await owner(stream)) === 'B', 'B to take the entry over', 15_000);
    link.restore();
    // A's heartbeats (queued while the link was down) reach Redis again: they used to steal it back.
    let stolen = false;
    await eventually(async () => {
      stolen ||= (await owner(stream)) === 'A';
      return stolen || lost.length > 0;
    }, 'A to come back', 15_000);

    admitting = true;
    await eventually(async () => (await queue.status(enqueued.ticket)).state === 'delivered', 'the entry delivered');
    await Promise.all(workers.map((worker) => worker.stop()));
    const deliveries = upstream.received.filter((request) => request.path === '/once');
    console.log(`[takeover] A stole the entry back: ${stolen}; A reported it lost: ${lost.length > 0}; the upstream got it ${deliveries.length} time(s)`);
    expect(deliveries).toHaveLength(1);
    expect(stolen).toBe(false);
    expect(lost).toEqual([id]);
  }, 45_000);
});
