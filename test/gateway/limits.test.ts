/**
 * What the gateway's rate-limit actions make of a request, seen from outside: each action, with
 * envoy's semantics, produces the descriptor a rule of limit 0 refuses (429) or a descriptor no rule
 * limits (200). And the answers are the middleware's: the same 429 headers and body, and the same
 * headers on admitted requests, for the same rules at the same instant.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimit } from '../../src/http/node.js';
import { compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse/index.js';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const deny = '{ unit: minute, requests_per_unit: 0 }';
const RULES = `domain: acts
descriptors:
  - key: source_cluster
    value: edge
    descriptors: [{ key: destination_cluster, value: app, rate_limit: ${deny} }]
  - { key: user, value: blocked, rate_limit: ${deny} }
  - { key: plan, value: free, rate_limit: ${deny} }
  - { key: remote_address, value: 203.0.113.7, rate_limit: ${deny} }
  - { key: path, value: /pseudo/deny, rate_limit: ${deny} }
  - { key: header_match, value: delete, rate_limit: ${deny} }
  - { key: tier, value: not-gold, rate_limit: ${deny} }
  - { key: generic_key, value: everything, rate_limit: ${deny} }
  - { key: bulk, value: upload, rate_limit: { unit: minute, requests_per_unit: 5 } }
---
domain: levels
descriptors:
  - key: org
    rate_limit: { name: org_budget, unit: minute, requests_per_unit: 10 }
    descriptors:
      - key: team
        rate_limit: { name: team_budget, unit: minute, requests_per_unit: 1 }
        descriptors: [{ key: user, rate_limit: { name: user_budget, unit: minute, requests_per_unit: 5 } }]
---
domain: parity
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;

const route = (path: string, actions: string, extra = '') => `  - match: { prefix: ${path} }
    upstream: app
    domain: acts${extra}
    rate_limits: [{ actions: [${actions}] }]
`;

const CONFIG = (upstream: string) => `listen: 0
source_cluster: edge
trust_proxy: loopback
upstreams: { app: "${upstream}" }
routes:
${route('/clusters', '{ source_cluster: {} }, { destination_cluster: {} }')}
${route('/user', '{ request_headers: { header_name: user, descriptor_key: user } }')}
${route('/optional', '{ request_headers: { header_name: user, descriptor_key: user, skip_if_absent: true } }, { generic_key: { descriptor_key: plan, descriptor_value: free } }')}
${route('/address', '{ remote_address: {} }')}
${route('/pseudo', '{ request_headers: { header_name: ":path", descriptor_key: path } }')}
${route('/method', '{ header_value_match: { descriptor_value: delete, headers: [{ name: ":method", exact: DELETE }] } }')}
${route('/tier', '{ header_value_match: { descriptor_key: tier, descriptor_value: not-gold, expect_match: false, headers: [{ name: x-tier, string_match: { exact: GOLD, ignore_case: true } }] } }')}
${route('/generic', '{ generic_key: { descriptor_value: everything } }')}
  - match: { prefix: /bulk }
    upstream: app
    domain: acts
    rate_limits: [{ actions: [{ generic_key: { descriptor_key: bulk, descriptor_value: upload } }], hits_addend: { number: 3 } }]
  - match: { prefix: /levels }
    upstream: app
    domain: levels
    rate_limits:
      - actions: [{ request_headers: { header_name: x-org, descriptor_key: org } }]
      - actions: [{ request_headers: { header_name: x-org, descriptor_key: org } }, { request_headers: { header_name: x-team, descriptor_key: team } }]
      - actions: [{ request_headers: { header_name: x-org, descriptor_key: org } }, { request_headers: { header_name: x-team, descriptor_key: team } }, { request_headers: { header_name: x-user, descriptor_key: user } }]
  - match: { prefix: /parity }
    upstream: app
    domain: parity
    rate_limits: [{ actions: [{ request_headers: { header_name: user, descriptor_key: user } }] }]
`;

const TOKEN = 'a-long-enough-admin-token';
let upstream: Upstream;
let gateway: TestGateway;
const clock = new TestClock();

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(CONFIG(upstream.url), RULES, { clock, flags: { 'admin-token': TOKEN } });
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

const CASES: readonly { name: string; path: string; method?: string; headers?: Record<string, string>; status: number }[] = [
  { name: 'source_cluster and destination_cluster: the configured cluster and the route upstream', path: '/clusters', status: 429 },
  { name: 'request_headers: the header value', path: '/user', headers: { user: 'blocked' }, status: 429 },
  { name: 'request_headers: another value', path: '/user', headers: { user: 'alice' }, status: 200 },
  { name: 'request_headers: an absent header drops the descriptor', path: '/user', status: 200 },
  { name: 'skip_if_absent: an absent header drops only its entry', path: '/optional', status: 429 },
  { name: 'skip_if_absent: a present header is an entry', path: '/optional', headers: { user: 'alice' }, status: 200 },
  { name: 'remote_address: the client behind a trusted proxy', path: '/address', headers: { 'x-forwarded-for': '203.0.113.7' }, status: 429 },
  { name: 'remote_address: another client', path: '/address', headers: { 'x-forwarded-for': '198.51.100.1' }, status: 200 },
  { name: 'the :path pseudo-header', path: '/pseudo/deny', status: 429 },
  { name: 'the :path pseudo-header, another path', path: '/pseudo/other', status: 200 },
  { name: 'header_value_match on :method', path: '/method', method: 'DELETE', status: 429 },
  { name: 'header_value_match on :method, no match drops the descriptor', path: '/method', status: 200 },
  { name: 'expect_match: false yields the entry when the headers do not match', path: '/tier', headers: { 'x-tier': 'silver' }, status: 429 },
  { name: 'expect_match: false, matching headers (ignore_case) drop the descriptor', path: '/tier', headers: { 'x-tier': 'gold' }, status: 200 },
  { name: 'generic_key: descriptor_key defaults to generic_key', path: '/generic', status: 429 },
];

describe('gateway rate-limit actions', () => {
  it.each(CASES)('$name', async ({ path, method, headers, status }) => {
    expect((await send(gateway.url(path), { method: method ?? 'GET', headers })).status).toBe(status);
  });

  it("an operator's block on the admin port refuses the descriptor entry with its remaining time", async () => {
    const block = await fetch(gateway.admin('/v1/keys/block'), { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ key: 'user=mallory', ttlMs: 90_000 }) });
    expect(block.status).toBe(200);
    const refused = await send(gateway.url('/user'), { headers: { user: 'mallory' } });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('90');
    expect((await send(gateway.url('/user'), { headers: { user: 'alice' } })).status).toBe(200);
  });

  it('an org > team > user hierarchy: the 429 names the level that fired (the team), the others had room', async () => {
    const as = (user: string) => send(gateway.url('/levels'), { headers: { 'x-org': 'acme', 'x-team': 'search', 'x-user': user, accept: 'application/json' } });
    expect((await as('1')).status).toBe(200);
    const refused = await as('2');
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'rate_limited', 'violated-policies': ['team_budget'] });
  });

  it('hits_addend: each request spends its number of hits', async () => {
    const first = await send(gateway.url('/bulk'));
    expect(first.status).toBe(200);
    expect(first.headers['x-ratelimit-remaining']).toBe('2');
    expect((await send(gateway.url('/bulk'))).status).toBe(429);
  });
});

describe('gateway answers are the middleware answers', () => {
  let server: Server;
  let middlewareUrl: string;

  beforeAll(async () => {
    const rules = compileRules(parseRules(RULES, 'rules.yaml'));
    const limiter = rateLimit({ rules, domain: 'parity', clock: clock.read, descriptors: (req) => [{ entries: [{ key: 'user', value: String(req.headers.user) }] }] });
    server = createServer(async (req, res) => {
      if (await limiter.handle(req, res)) res.end('app');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    middlewareUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/parity`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('sends the same rate-limit headers when admitted, and the same 429 headers and body when refused', async () => {
    const pick = (headers: Record<string, unknown>) => Object.fromEntries(Object.entries(headers).filter(([name]) => /ratelimit|retry-after|content-type/.test(name) || name === 'content-length'));
    for (let i = 0; i < 3; i++) {
      const viaGateway = await send(gateway.url('/parity'), { headers: { user: 'ann', accept: 'application/json' } });
      const viaMiddleware = await send(middlewareUrl, { headers: { user: 'ann', accept: 'application/json' } });
      expect(viaGateway.status).toBe(viaMiddleware.status);
      expect(viaGateway.headers['x-ratelimit-remaining']).toBe(viaMiddleware.headers['x-ratelimit-remaining']);
      if (viaGateway.status === 429) {
        // Plus envoy's marker, which the middleware does not send.
        const { 'x-envoy-ratelimited': marker, ...gatewayHeaders } = viaGateway.headers;
        expect(marker).toBe('true');
        expect(pick(gatewayHeaders)).toEqual(pick(viaMiddleware.headers));
        expect(viaGateway.body).toBe(viaMiddleware.body);
        expect(JSON.parse(viaGateway.body)).toMatchObject({ error: 'rate_limited', limit: 2, remaining: 0 });
      } else {
        const limits = (headers: Record<string, unknown>) => Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('x-ratelimit')));
        expect(limits(viaGateway.headers)).toEqual(limits(viaMiddleware.headers));
        expect(Object.keys(limits(viaGateway.headers))).toHaveLength(3);
        expect(viaGateway.body).toBe('upstream GET /parity');
      }
    }
  });
});
