/**
 * The upstream is called only once the decision admits a request, also while a Redis decision is
 * in flight: 20 requests at once (GET and POST) on a limit of 5 per minute, decided through Redis,
 * and exactly the 5 admitted reach the upstream. The gateway never forwards speculatively (a denied
 * request must find the upstream untouched: a POST it had started would have acted).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedisTopologies } from '../support/redis-topologies.js';
import { send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const RULES = `domain: orders
descriptors:
  - { key: generic_key, value: orders, rate_limit: { unit: minute, requests_per_unit: 5 } }
`;

const redis = useRedisTopologies();
let upstream: Upstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(
    `listen: 0\nupstreams: { app: "${upstream.url}" }\ndomain: orders\nroutes:\n  - match: { prefix: /orders }\n    upstream: app\n    rate_limits: [{ actions: [{ generic_key: { descriptor_value: orders } }] }]\n`,
    RULES,
    { flags: { redis: redis.single.url } },
  );
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

describe('the decision before the upstream', () => {
  it('20 requests at once on a limit of 5, decided through Redis: exactly the 5 admitted reach the upstream', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => send(gateway.url(`/orders/${i}`), i % 2 === 0 ? { method: 'POST', body: `order ${i}` } : {})),
    );
    const admitted = answers.map((answer, i) => (answer.status === 200 ? `/orders/${i}` : undefined)).filter((path) => path !== undefined);
    expect(answers.filter((answer) => answer.status === 429)).toHaveLength(15);
    expect(admitted).toHaveLength(5);
    expect(upstream.requests.map((request) => request.url).sort()).toEqual(admitted.sort());
  });
});
