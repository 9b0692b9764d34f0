/**
 * The gateway on Redis, and what it answers once the test kills that Redis: each route's limit
 * decided by its failure mode exactly as the decision service decides it (the gateway's
 * `--failure-mode open`, a rule's own `failure_mode: closed`), and said in `Tollgate-Degraded`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedisServer } from '../support/redis-topologies.js';
import { send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const RULES = `domain: shop
descriptors:
  - { key: generic_key, value: browse, rate_limit: { unit: minute, requests_per_unit: 100 } }
  - { key: generic_key, value: pay, rate_limit: { unit: minute, requests_per_unit: 100, failure_mode: closed } }
`;

const redis = useRedisServer();
let upstream: Upstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  const route = (path: string, value: string) => `  - match: { prefix: ${path} }\n    upstream: app\n    rate_limits: [{ actions: [{ generic_key: { descriptor_value: ${value} } }] }]\n`;
  gateway = await startTestGateway(`listen: 0\nupstreams: { app: "${upstream.url}" }\ndomain: shop\nroutes:\n${route('/browse', 'browse')}${route('/pay', 'pay')}`, RULES, {
    flags: { redis: redis.url, 'failure-mode': 'open', 'deadline-ms': '50' },
  });
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

describe('gateway with its Redis gone', () => {
  it('answers by each limit failure mode, and says so', async () => {
    for (const path of ['/browse', '/pay']) {
      const answer = await send(gateway.url(path));
      expect(answer.status, path).toBe(200);
      expect(answer.headers['x-ratelimit-remaining'], path).toBe('99');
      expect(answer.headers['tollgate-degraded'], path).toBeUndefined();
    }
    await redis.stop();
    const open = await send(gateway.url('/browse'));
    expect(open.status).toBe(200);
    expect(open.body).toBe('upstream GET /browse');
    expect(open.headers['tollgate-degraded']).toBe('fail-open');
    const closed = await send(gateway.url('/pay'));
    expect(closed.status).toBe(429);
    expect(closed.headers['tollgate-degraded']).toBe('fail-closed');
    expect(JSON.parse(closed.body)).toMatchObject({ error: 'rate_limited' });
    const metrics = await (await fetch(gateway.admin('/metrics'))).text();
    expect(metrics).toMatch(/tollgate_degraded_checks_total\{reason="fail-open",transport="gateway"\} [1-9]/);
  });
});
