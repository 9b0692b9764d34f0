/**
 * IPv6 address rotation through the gateway: a client holds a /64 (usually a /56) and can pick any
 * of its 2^64 addresses. The gateway's `remote_address` was the full address, so five addresses of
 * one /64 got five fresh quotas, where the middleware keys the same client on its subnet. Now
 * `remote_address` is the middleware's value (IPv4 as is, IPv6 as its network of `ipv6_subnet` bits,
 * default 56, e.g. `2001:db8:1:200::/56`), and envoy's `masked_remote_address` action
 * (`v4_prefix_mask_len`, `v6_prefix_mask_len`) gives any other prefix. Requests come over IPv6
 * loopback (`::1`), a trusted proxy, whose `X-Forwarded-For` names the client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const RULES = `domain: ipv6
descriptors:
  - { key: remote_address, rate_limit: { unit: minute, requests_per_unit: 2 } }
  - { key: masked_remote_address, value: "10.1.2.0/24", rate_limit: { unit: minute, requests_per_unit: 0 } }
  - { key: masked_remote_address, value: "2001:db8:7:8::/64", rate_limit: { unit: minute, requests_per_unit: 0 } }
`;

const CONFIG = (upstream: string) => `listen: 0
upstreams: { app: "${upstream}" }
trust_proxy: loopback
domain: ipv6
routes:
  - match: { prefix: /masked }
    upstream: app
    rate_limits: [{ actions: [{ masked_remote_address: { v4_prefix_mask_len: 24, v6_prefix_mask_len: 64 } }] }]
  - match: { prefix: / }
    upstream: app
    rate_limits: [{ actions: [{ remote_address: {} }] }]
`;

const clock = new TestClock();
let upstream: Upstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(CONFIG(upstream.url), RULES, { clock, flags: { host: '::1' } });
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

/** Statuses of one request from each client address, through the gateway's IPv6 loopback port. */
async function statuses(path: string, clients: readonly string[]): Promise<number[]> {
  const answers: number[] = [];
  for (const client of clients) answers.push((await send(`http://[::1]:${gateway.gateway.port}${path}`, { headers: { 'x-forwarded-for': client } })).status);
  return answers;
}

describe('IPv6 address rotation', () => {
  it('five addresses of one /64 share one quota of 2 (before: 5 of 5 admitted)', async () => {
    expect(await statuses('/api', ['2001:db8:1:1::1', '2001:db8:1:1::2', '2001:db8:1:1:ffff::3', '2001:db8:1:1::4', '2001:db8:1:1::5'])).toEqual([200, 200, 429, 429, 429]);
  });

  it('the subnet is the middleware\'s (56 bits): another /64 of the same /56 is the same client, another /56 is not', async () => {
    expect(await statuses('/api', ['2001:db8:1:ff::1', '2001:db8:2::1', '2001:db8:2:1::1', '2001:db8:2:2::1'])).toEqual([429, 200, 200, 429]);
  });

  it('IPv4 clients are still keyed by their whole address', async () => {
    expect(await statuses('/api', ['198.51.100.1', '198.51.100.1', '198.51.100.1', '198.51.100.2'])).toEqual([200, 200, 429, 200]);
  });

  it('masked_remote_address makes envoy\'s CIDR entry (10.1.2.0/24, 2001:db8:7:8::/64)', async () => {
    expect(await statuses('/masked', ['10.1.2.77', '10.1.2.200', '10.1.3.1'])).toEqual([429, 429, 200]);
    expect(await statuses('/masked', ['2001:db8:7:8::1', '2001:db8:7:8:abcd::9', '2001:db8:7:9::1'])).toEqual([429, 429, 200]);
    expect(upstream.requests.map((request) => request.headers['x-forwarded-for']).filter((value) => String(value).startsWith('10.1.3.1'))).toHaveLength(1);
  });
});
