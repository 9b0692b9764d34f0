/**
 * The deferred queue on a real Redis: enqueue answers a ticket and a position, status follows the
 * ticket, the per-queue bound holds under concurrent enqueues from several connections, and bad
 * input is refused with typed errors before anything is stored.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DeferredBodyTooLargeError, InvalidDeferredRequestError, InvalidOptionError } from '../../../src/errors.js';
import { createDeferredQueue, startDrainWorker, type DeferredQueueOptions, type DrainWorkerOptions } from '../../../src/gateway/defer/index.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const server = useRedisServer();
const clients: Redis[] = [];

function client(): Redis {
  const redis = new Redis(server.url);
  clients.push(redis);
  return redis;
}

afterAll(() => {
  for (const redis of clients) redis.disconnect();
});

describe('enqueue and status', () => {
  it('answers a ticket and the position, and status says queued at that position', async () => {
    const queue = createDeferredQueue({ redis: client(), clock: () => 1_700_000_000_000 });
    const first = await queue.enqueue('orders', { method: 'POST', path: '/orders?x=1', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
    const second = await queue.enqueue('orders', { method: 'POST', path: '/orders', body: Buffer.from([0, 255]) });
    expect(first).toMatchObject({ accepted: true, position: 1, length: 1 });
    expect(second).toMatchObject({ accepted: true, position: 2, length: 2 });
    if (!first.accepted || !second.accepted) return;
    expect(first.ticket).toMatch(/^orders\.[A-Za-z0-9_-]{22}$/);
    expect(first.ticket).not.toBe(second.ticket);
    expect(await queue.status(second.ticket)).toEqual({ state: 'queued', ticket: second.ticket, enqueuedAt: 1_700_000_000_000, position: 2 });
    expect(await queue.length('orders')).toBe(2);
  });

  it('says unknown for a malformed ticket, one never issued, and one of a queue that does not exist', async () => {
    const queue = createDeferredQueue({ redis: client() });
    for (const ticket of ['', 'nope', 'orders.tooShort', 'orders.AAAAAAAAAAAAAAAAAAAAAA', 'other.AAAAAAAAAAAAAAAAAAAAAA', '{x}.AAAAAAAAAAAAAAAAAAAAAA']) {
      expect(await queue.status(ticket)).toEqual({ state: 'unknown', ticket });
    }
  });

  it('keeps its keys under one hash tag per queue, with the prefix', async () => {
    const redis = client();
    const queue = createDeferredQueue({ redis, prefix: 'tags:' });
    await queue.enqueue('payments', { method: 'GET', path: '/' });
    const keys = (await redis.keys('tags:*')).sort();
    expect(keys).toHaveLength(3);
    for (const key of keys) expect(key.startsWith('tags:{payments}:')).toBe(true);
  });
});

describe('the bound', () => {
  it('50 concurrent enqueues from 5 connections on a bound of 20: exactly 20 accepted', async () => {
    let refused = 0;
    const lengths: number[] = [];
    const options: Partial<DeferredQueueOptions> = { maxLength: 20, hooks: { refused: () => refused++, queueLength: (_name, length) => lengths.push(length) } };
    const queues = Array.from({ length: 5 }, () => createDeferredQueue({ redis: client(), ...options }));
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => queues[i % 5]!.enqueue('bounded', { method: 'POST', path: `/job/${i}`, body: 'x'.repeat(100) })));
    expect(results.filter((result) => result.accepted)).toHaveLength(20);
    expect(results.filter((result) => !result.accepted)).toEqual(Array.from({ length: 30 }, () => ({ accepted: false, length: 20, maxLength: 20 })));
    expect(refused).toBe(30);
    expect(Math.max(...lengths)).toBe(20);
    expect(await queues[0]!.length('bounded')).toBe(20);
    const positions = results.flatMap((result) => (result.accepted ? [result.position] : [])).sort((a, b) => a - b);
    expect(positions).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('takes a per-queue bound at enqueue (one per rule)', async () => {
    const queue = createDeferredQueue({ redis: client() });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await queue.enqueue('small', { method: 'GET', path: '/' }, { maxLength: 2 })).accepted);
    expect(answers).toEqual([true, true, false]);
  });
});

describe('bad input', () => {
  it('refuses a body over maxBodyBytes with DeferredBodyTooLargeError (413-style), storing nothing', async () => {
    const queue = createDeferredQueue({ redis: client(), maxBodyBytes: 1_024 });
    const error = await queue.enqueue('big', { method: 'POST', path: '/', body: Buffer.alloc(1_025) }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DeferredBodyTooLargeError);
    expect(error).toMatchObject({ code: 'ERR_TOLLGATE_DEFERRED_BODY_TOO_LARGE', limitBytes: 1_024, message: expect.stringMatching(/1025 bytes.*at most 1024.*maxBodyBytes/) });
    expect((await queue.enqueue('big', { method: 'POST', path: '/', body: Buffer.alloc(1_024) })).accepted).toBe(true);
    expect(await queue.length('big')).toBe(1);
  });

  it.each([
    ['a method with a space', { method: 'PO ST', path: '/' }, /method/],
    ['a path without a leading slash', { method: 'GET', path: 'http://evil/' }, /path must start with "\/"/],
    ['a path with a newline', { method: 'GET', path: '/a\nb' }, /path/],
    ['a header value with CRLF', { method: 'GET', path: '/', headers: [['x-a', 'b\r\nx-injected: 1']] }, /value of x-a/],
    ['a header name with a colon', { method: 'GET', path: '/', headers: { 'x:a': 'b' } }, /not a valid header name/],
    ['a header that is not a pair', { method: 'GET', path: '/', headers: [['x-a']] }, /\[name, value\] pair/],
    ['a body of the wrong type', { method: 'GET', path: '/', body: 42 }, /body must be a Buffer/],
    ['no request at all', null, /must be an object/],
  ])('refuses %s with InvalidDeferredRequestError', async (_name, request, message) => {
    const queue = createDeferredQueue({ redis: client() });
    const error = await queue.enqueue('bad', request as never).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InvalidDeferredRequestError);
    expect((error as Error).message).toMatch(message);
    expect(await queue.length('bad')).toBe(0);
  });

  it('refuses a bad queue name', async () => {
    const queue = createDeferredQueue({ redis: client() });
    await expect(queue.enqueue('a.b', { method: 'GET', path: '/' })).rejects.toThrow(InvalidOptionError);
    await expect(queue.enqueue('{tag}', { method: 'GET', path: '/' })).rejects.toThrow(/queue name/);
  });

  it.each([
    ['no redis', {}, /redis must be an ioredis/],
    ['a misspelt option', { maxLenght: 5 }, /unknown option "maxLenght"/],
    ['maxLength 0', { maxLength: 0 }, /maxLength must be a whole number from 1/],
    ['a fractional resultTtlMs', { resultTtlMs: 1.5 }, /resultTtlMs/],
    ['a prefix with braces', { prefix: '{x}' }, /prefix/],
    ['a hook that is not a function', { hooks: { enqueued: 1 } }, /hooks.enqueued must be a function/],
    ['an unknown hook', { hooks: { delivered: () => {} } }, /unknown hook "delivered"/],
  ])('createDeferredQueue refuses %s with InvalidOptionError', (name, options, message) => {
    const all = { ...(name === 'no redis' ? {} : { redis: client() }), ...options } as DeferredQueueOptions;
    expect(() => createDeferredQueue(all)).toThrow(message);
    expect(() => createDeferredQueue(all)).toThrow(InvalidOptionError);
  });

  it.each([
    ['a queue not made by createDeferredQueue', { queue: {} }, /queue must come from createDeferredQueue/],
    ['no admit', { admit: undefined }, /admit must be a function/],
    ['no consumer', { consumer: undefined }, /consumer must be/],
    ['maxAttempts 0', { maxAttempts: 0 }, /maxAttempts must be a whole number from 1/],
    ['backoffMaxMs under backoffBaseMs', { backoffBaseMs: 1_000, backoffMaxMs: 10 }, /backoffMaxMs/],
    ['a misspelt option', { maxAttempt: 3 }, /unknown option "maxAttempt"/],
  ])('startDrainWorker refuses %s with InvalidOptionError', (_name, override, message) => {
    const queue = createDeferredQueue({ redis: client() });
    const options = { queue, queueName: 'q', consumer: 'c', admit: () => ({ allowed: true, retryAfterMs: 0 }), deliver: async () => ({ status: 200 }), ...override };
    expect(() => startDrainWorker(options as DrainWorkerOptions)).toThrow(message);
    expect(() => startDrainWorker(options as DrainWorkerOptions)).toThrow(InvalidOptionError);
  });
});
