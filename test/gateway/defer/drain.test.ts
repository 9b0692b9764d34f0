/**
 * The drain worker on a real Redis against a real node:http upstream: delivery in order at the
 * rate a real limiter allows, the request kept intact (minus hop-by-hop headers) with the ticket as
 * idempotency key, results readable by ticket, retries with backoff, giving up, a clean stop that
 * leaves the entry in flight pending, and a restart or another consumer picking it up.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createLimiter } from '../../../src/index.js';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer, type DeferredQueue, type DrainWorker, type DrainWorkerOptions } from '../../../src/gateway/defer/index.js';
import { eventually, startUpstream, type Reply, type Upstream } from '../../support/defer-upstream.js';
import { useRedisWithClient } from '../../support/redis-topologies.js';

const shared = useRedisWithClient();
const server = shared.server;
let queueCount = 0;
const workers: DrainWorker[] = [];
const upstreams: Upstream[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop()));
  await Promise.all(upstreams.splice(0).map((upstream) => upstream.close()));
});

async function upstream(respond?: (request: { path: string }, index: number) => Reply): Promise<Upstream> {
  const started = await startUpstream(respond);
  upstreams.push(started);
  return started;
}

function worker(options: Partial<DrainWorkerOptions> & Pick<DrainWorkerOptions, 'queue' | 'queueName' | 'deliver'>): DrainWorker {
  const started = startDrainWorker({ consumer: 'w1', admit: () => ({ allowed: true, retryAfterMs: 0 }), blockMs: 100, ...options });
  workers.push(started);
  return started;
}

/** A fresh queue name per test, so tests never see each other's entries. */
function nextQueue(): { queue: DeferredQueue; queueName: string } {
  return { queue: createDeferredQueue({ redis: shared.redis }), queueName: `q${++queueCount}` };
}

async function enqueueAll(queue: DeferredQueue, queueName: string, count: number): Promise<string[]> {
  const tickets: string[] = [];
  for (let i = 0; i < count; i++) {
    const result = await queue.enqueue(queueName, { method: 'POST', path: `/job/${i}`, body: `body ${i}` });
    if (!result.accepted) throw new Error('queue full');
    tickets.push(result.ticket);
  }
  return tickets;
}

async function allDelivered(queue: DeferredQueue, tickets: readonly string[]): Promise<boolean> {
  const states = await Promise.all(tickets.map((ticket) => queue.status(ticket)));
  return states.every((status) => status.state === 'delivered' || status.state === 'failed');
}

describe('drain', () => {
  it('delivers in order at the rate a real limiter allows (20 per second, one at a time)', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream();
    const tickets = await enqueueAll(queue, queueName, 12);
    const limiter = createLimiter();
    const policy = { algorithm: 'gcra', limit: 20, window: '1s', burst: 1 } as const;
    const admit = async (): Promise<{ allowed: boolean; retryAfterMs: number }> => {
      const decision = await limiter.limit(`defer:${queueName}`, policy);
      return { allowed: decision.allowed, retryAfterMs: decision.retryAfter };
    };
    worker({ queue, queueName, admit, deliver: upstreamDeliverer(target.url) });
    await eventually(() => allDelivered(queue, tickets), 'every ticket delivered');
    expect(target.received.map((request) => request.path)).toEqual(tickets.map((_, i) => `/job/${i}`));
    expect(target.keys()).toEqual(tickets);
    // Admitted 50 ms apart; the upstream sees each arrival late by the trip (0 to tens of ms on a
    // loaded machine), so one gap can look short, but no run of arrivals can: arrival j − arrival i
    // ≥ (j − i) × 50 ms − the trip of i. Checked over every run of 5 gaps, with 60 ms for the trip.
    const at = target.received.map((request) => request.at);
    for (let i = 0; i + 5 < at.length; i++) expect(at[i + 5]! - at[i]!).toBeGreaterThanOrEqual(5 * 50 - 60);
    expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(11 * 50 - 60);
    const gaps = at.slice(1).map((time, i) => time - at[i]!).sort((a, b) => a - b);
    expect(gaps[Math.floor(gaps.length / 2)]!).toBeGreaterThanOrEqual(40);
    expect(await queue.length(queueName)).toBe(0);
  });

  it('replays method, path, body and end-to-end headers; records the upstream answer for the ticket', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream(() => ({ status: 201, body: 'created', headers: { 'x-upstream': 'yes', connection: 'close' } }));
    const body = Buffer.from([0, 1, 2, 253, 254, 255]);
    const headers: [string, string][] = [['content-type', 'application/octet-stream'], ['x-trace', 'a'], ['x-trace', 'b'], ['connection', 'keep-alive, x-private'], ['x-private', 'secret'], ['keep-alive', 'timeout=5'], ['upgrade', 'h2c'], ['idempotency-key', 'client-chosen']];
    const enqueued = await queue.enqueue(queueName, { method: 'PUT', path: '/items/7?dry=1&x=%20', headers, body });
    if (!enqueued.accepted) throw new Error('refused');
    const delivered: unknown[] = [];
    worker({ queue, queueName, deliver: upstreamDeliverer(target.url), hooks: { delivered: (...args) => delivered.push(args) } });
    await eventually(() => allDelivered(queue, [enqueued.ticket]), 'the ticket delivered');
    const [request] = target.received;
    expect(request).toMatchObject({ method: 'PUT', path: '/items/7?dry=1&x=%20', body });
    // The client's own key goes through as it was sent; the ticket has a header of its own.
    expect(request!.headers).toMatchObject({ 'content-type': 'application/octet-stream', 'x-trace': 'a, b', 'idempotency-key': 'client-chosen', 'tollgate-ticket': enqueued.ticket });
    for (const dropped of ['x-private', 'keep-alive', 'upgrade']) expect(request!.headers[dropped]).toBeUndefined();
    const status = await queue.status(enqueued.ticket);
    expect(status).toMatchObject({ state: 'delivered', attempts: 1, status: 201, bodyTruncated: false });
    if (status.state !== 'delivered') return;
    expect(status.body.toString()).toBe('created');
    expect(status.headers).toContainEqual(['x-upstream', 'yes']);
    expect(status.headers.map(([name]) => name)).not.toContain('connection');
    expect(delivered).toEqual([[queueName, enqueued.ticket, 201, 1]]);
  });

  it('records a 4xx as the result, without retrying', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream(() => ({ status: 409, body: 'conflict' }));
    const [ticket] = await enqueueAll(queue, queueName, 1);
    worker({ queue, queueName, deliver: upstreamDeliverer(target.url) });
    await eventually(() => allDelivered(queue, [ticket!]), 'the ticket delivered');
    expect(await queue.status(ticket!)).toMatchObject({ state: 'delivered', status: 409, attempts: 1 });
    expect(target.received).toHaveLength(1);
  });
});

describe('retries', () => {
  it('retries a 503 with exponential backoff, the same idempotency key each time, then records the success', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream((_request, index) => (index < 2 ? { status: 503 } : { status: 200, body: 'done' }));
    const [ticket] = await enqueueAll(queue, queueName, 1);
    const waits: number[] = [];
    const retried: unknown[] = [];
    worker({
      queue, queueName, deliver: upstreamDeliverer(target.url), backoffBaseMs: 100, random: () => 0.5,
      sleep: async (ms) => { waits.push(ms); },
      hooks: { retried: (...args) => retried.push(args) },
    });
    await eventually(() => allDelivered(queue, [ticket!]), 'the ticket delivered');
    // Equal jitter: half of base × 2^(n−1) fixed, half random (0.5 here).
    expect(waits).toEqual([75, 150]);
    expect(retried).toEqual([[queueName, ticket, 1, 75, 'upstream answered 503'], [queueName, ticket, 2, 150, 'upstream answered 503']]);
    expect(target.keys()).toEqual([ticket, ticket, ticket]);
    expect(await queue.status(ticket!)).toMatchObject({ state: 'delivered', status: 200, attempts: 3 });
  });

  it('gives up after maxAttempts and marks the ticket failed with the last error', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream(() => ({ status: 503 }));
    const [ticket, next] = await enqueueAll(queue, queueName, 2);
    const failed: unknown[] = [];
    worker({ queue, queueName, deliver: upstreamDeliverer(target.url), maxAttempts: 3, backoffBaseMs: 1, hooks: { failed: (...args) => failed.push(args) } });
    await eventually(() => allDelivered(queue, [ticket!, next!]), 'both tickets finished');
    expect(await queue.status(ticket!)).toMatchObject({ state: 'failed', attempts: 3, error: 'upstream answered 503' });
    expect(target.keys()).toEqual([ticket, ticket, ticket, next, next, next]);
    expect(failed).toEqual([[queueName, ticket, 3, 'upstream answered 503'], [queueName, next, 3, 'upstream answered 503']]);
  });

  it('retries a network error (nothing listening) and reports it when it gives up', async () => {
    const { queue, queueName } = nextQueue();
    const closed = await startUpstream();
    await closed.close();
    const [ticket] = await enqueueAll(queue, queueName, 1);
    worker({ queue, queueName, deliver: upstreamDeliverer(closed.url), maxAttempts: 2, backoffBaseMs: 1 });
    await eventually(() => allDelivered(queue, [ticket!]), 'the ticket failed');
    expect(await queue.status(ticket!)).toMatchObject({ state: 'failed', attempts: 2, error: expect.stringMatching(/ECONNREFUSED/) });
  });
});

describe('stop, restart and reclaim', () => {
  it('stop() abandons a hung delivery within its grace, leaves it pending, and a restart with the same name delivers it', async () => {
    const { queue, queueName } = nextQueue();
    let hang = true;
    const target = await upstream(() => (hang ? { hang: true, status: 200 } : { status: 200, body: 'late' }));
    const [ticket] = await enqueueAll(queue, queueName, 1);
    const first = startDrainWorker({ queue, queueName, consumer: 'same', admit: () => ({ allowed: true, retryAfterMs: 0 }), deliver: upstreamDeliverer(target.url), stopGraceMs: 100, minIdleMs: 60_000 });
    await eventually(() => target.received.length === 1, 'the first attempt');
    const stopping = performance.now();
    await first.stop();
    expect(performance.now() - stopping).toBeLessThan(2_000);
    expect(await queue.status(ticket!)).toMatchObject({ state: 'delivering', attempts: 1 });
    expect(await queue.length(queueName)).toBe(1);
    hang = false;
    // minIdleMs is a minute: only re-reading its own pending entries can find it.
    worker({ queue, queueName, consumer: 'same', deliver: upstreamDeliverer(target.url), minIdleMs: 60_000 });
    await eventually(() => allDelivered(queue, [ticket!]), 'the ticket delivered after the restart');
    expect(await queue.status(ticket!)).toMatchObject({ state: 'delivered', attempts: 2, status: 200 });
    expect(target.keys()).toEqual([ticket, ticket]);
  });

  it('an attempt cut short by a stop counts: with maxAttempts 1 the restarted worker marks the ticket failed, without delivering again', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream(() => ({ hang: true, status: 200 }));
    const [ticket] = await enqueueAll(queue, queueName, 1);
    const options = { queue, queueName, consumer: 'same', deliver: upstreamDeliverer(target.url), maxAttempts: 1, stopGraceMs: 50, minIdleMs: 60_000 };
    const first = startDrainWorker({ ...options, admit: () => ({ allowed: true, retryAfterMs: 0 }) });
    await eventually(() => target.received.length === 1, 'the first attempt');
    await first.stop();
    worker(options);
    await eventually(() => allDelivered(queue, [ticket!]), 'the ticket finished');
    expect(await queue.status(ticket!)).toMatchObject({ state: 'failed', attempts: 1, error: expect.stringMatching(/interrupted/) });
    expect(target.received).toHaveLength(1);
  });

  it('another consumer reclaims an entry left pending by one that died after reading it', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream();
    const [ticket, second] = await enqueueAll(queue, queueName, 2);
    // A consumer that read the first entry and died before doing anything with it.
    const stream = `tollgate:defer:{${queueName}}:stream`;
    await shared.redis.call('XGROUP', 'CREATE', stream, 'tollgate-drain', '0');
    await shared.redis.call('XREADGROUP', 'GROUP', 'tollgate-drain', 'dead', 'COUNT', '1', 'STREAMS', stream, '>');
    worker({ queue, queueName, consumer: 'alive', deliver: upstreamDeliverer(target.url), minIdleMs: 200, reclaimIntervalMs: 50 });
    await eventually(() => allDelivered(queue, [ticket!, second!]), 'both tickets delivered');
    expect(target.keys().sort()).toEqual([ticket, second].sort());
  });

  it('a consumer taken for dead while delivering: the one that took over does not deliver again once the result is recorded', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream((_request, index) => (index === 0 ? { status: 200, delayMs: 1_000 } : { status: 200 }));
    const [ticket] = await enqueueAll(queue, queueName, 1);
    // Its heartbeat (every minIdleMs / 3 = 20 s) is too slow for the other's minIdleMs: it looks dead at once.
    const slow = worker({ queue, queueName, consumer: 'slow', deliver: upstreamDeliverer(target.url), minIdleMs: 60_000 });
    await eventually(() => target.received.length === 1, 'the slow consumer delivering');
    let asked = 0;
    const admit = (): { allowed: boolean; retryAfterMs: number } => ({ allowed: ++asked > 1, retryAfterMs: 1_300 });
    worker({ queue, queueName, consumer: 'fast', admit, deliver: upstreamDeliverer(target.url), minIdleMs: 100, reclaimIntervalMs: 20 });
    await eventually(() => asked === 1, 'the fast consumer took the entry over');
    await eventually(() => allDelivered(queue, [ticket!]), 'the slow consumer recorded its result');
    await slow.stop();
    // A second entry, which the fast consumer reads only once it is done with the first.
    const [after] = await enqueueAll(queue, queueName, 1);
    await eventually(() => allDelivered(queue, [after!]), 'the next entry delivered');
    expect(asked).toBeGreaterThanOrEqual(2);
    expect(target.keys()).toEqual([ticket, after]);
  });

  it('stop() while waiting for admission returns at once, leaves no timer and no attempt made', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream();
    const [ticket] = await enqueueAll(queue, queueName, 1);
    let asked = 0;
    const timers = (): number => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
    const timersBefore = timers();
    const drain = startDrainWorker({ queue, queueName, consumer: 'w', admit: () => { asked++; return { allowed: false, retryAfterMs: 60_000 }; }, deliver: upstreamDeliverer(target.url) });
    await eventually(() => asked === 1, 'admit asked');
    const stopping = performance.now();
    await drain.stop();
    expect(performance.now() - stopping).toBeLessThan(1_000);
    // The minute-long wait for admission, the heartbeat: no timer of the worker's is left.
    expect(timers()).toBe(timersBefore);
    expect(await queue.status(ticket!)).toMatchObject({ state: 'queued' });
    expect(target.received).toHaveLength(0);
  });
});

describe('Redis going away', () => {
  it('the worker rides out a Redis restart that lost everything: reports the errors, makes its group again, drains what comes next', async () => {
    const { queue, queueName } = nextQueue();
    const target = await upstream();
    const errors: unknown[] = [];
    worker({ queue, queueName, deliver: upstreamDeliverer(target.url), backoffBaseMs: 50, hooks: { error: (error) => errors.push(error) } });
    const [before] = await enqueueAll(queue, queueName, 1);
    await eventually(() => allDelivered(queue, [before!]), 'the first ticket delivered');
    await server.restart();
    await eventually(() => errors.length > 0, 'an error reported');
    await eventually(async () => (await shared.redis.ping().catch(() => '')) === 'PONG', 'the client reconnected');
    const [after] = await enqueueAll(queue, queueName, 1);
    await eventually(() => allDelivered(queue, [after!]), 'the ticket enqueued after the restart delivered', 15_000);
    expect(target.keys()).toEqual([before, after]);
  }, 30_000);
});
