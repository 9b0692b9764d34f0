/**
 * A deferred request's replay replaced the client's `Idempotency-Key` with the ticket and left out
 * the client's `Host` (the upstream got its own address instead): an upstream could not drop a
 * client's retry that went once live and once through the queue, nor route by host. The replay now
 * carries both as the client sent them, and the ticket in a header of its own, `Tollgate-Ticket`,
 * which a client cannot send upstream itself (the gateway drops a client's own, live or deferred).
 * Through the gateway on loopback, against a real redis-server and a real node:http upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startUpstream, type Upstream } from '../support/defer-upstream.js';
import { TestClock, send, startTestGateway, type TestGateway } from '../support/gateway.js';
import { useRedisServer } from '../support/redis-topologies.js';

/** One request passes live (burst 1); the next waits in the queue until the clock moves 50 ms. */
const RULES = `domain: orders
descriptors:
  - { key: client, value: shop, rate_limit: { unit: second, requests_per_unit: 20, algorithm: token-bucket, burst: 1 } }
`;
const CONFIG = (upstream: string): string => `listen: 0
upstreams: { app: "${upstream}" }
routes:
  - match: { prefix: /orders }
    upstream: app
    domain: orders
    on_limit: defer
    defer: { queue: orders }
    rate_limits: [{ actions: [{ generic_key: { descriptor_key: client, descriptor_value: shop } }] }]
`;

const redis = useRedisServer();
const clock = new TestClock();

describe('a deferred replay keeps the client\'s Idempotency-Key and Host', () => {
  let upstream: Upstream;
  let gateway: TestGateway;
  beforeAll(async () => {
    upstream = await startUpstream(() => ({ status: 201, body: 'created' }));
    gateway = await startTestGateway(CONFIG(upstream.url), RULES, { flags: { redis: redis.url }, clock });
  }, 20_000);
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('sends the client\'s key and Host upstream, the ticket as Tollgate-Ticket, and never a client\'s own Tollgate-Ticket', async () => {
    const headers = (key: string): Record<string, string> => ({ host: 'shop.example.com', 'idempotency-key': key, 'tollgate-ticket': 'forged-by-the-client' });
    const live = await send(gateway.url('/orders/1'), { method: 'POST', headers: headers('client-key-1'), body: 'one' });
    const deferred = await send(gateway.url('/orders/2'), { method: 'POST', headers: headers('client-key-2'), body: 'two' });
    expect([live.status, deferred.status]).toEqual([201, 202]);
    const { ticket } = JSON.parse(deferred.body) as { ticket: string };
    clock.now += 50;
    await eventually(() => upstream.received.length === 2, 'the replay to reach the upstream');

    const [proxied, replayed] = upstream.received;
    expect(replayed!.path).toBe('/orders/2');
    expect(replayed!.body.toString()).toBe('two');
    expect(replayed!.headers).toMatchObject({ host: 'shop.example.com', 'idempotency-key': 'client-key-2', 'tollgate-ticket': ticket, 'x-forwarded-host': 'shop.example.com' });
    expect(proxied!.headers).toMatchObject({ host: 'shop.example.com', 'idempotency-key': 'client-key-1' });
    expect(proxied!.headers['tollgate-ticket']).toBeUndefined();
  });

  it('a client\'s retry, once live and once deferred, reaches the upstream with the same key both times', async () => {
    // The bucket whole again: the first goes live and the retry is deferred.
    clock.now += 1_000;
    const first = upstream.received.length;
    const answers = [];
    for (let i = 0; i < 2; i++) answers.push(await send(gateway.url('/orders/3'), { method: 'POST', headers: { 'idempotency-key': 'retry-me' }, body: 'three' }));
    expect(answers.map((answer) => answer.status)).toEqual([201, 202]);
    clock.now += 50;
    await eventually(() => upstream.received.length === first + 2, 'the retry\'s replay to reach the upstream');
    expect(upstream.received.slice(first).map((request) => request.headers['idempotency-key'])).toEqual(['retry-me', 'retry-me']);
  });
});
