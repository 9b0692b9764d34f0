/**
 * Duplicate request headers against a `request_headers` limit: `x-api-key: K` plus a second line
 * `x-api-key: rN` made the descriptor `K, rN` (node joins repeated lines), a fresh counter for each
 * rN, while an upstream that reads the first line served K unlimited. envoy builds the entry from
 * the first line only; the gateway cannot know which line an upstream reads (the first, the last,
 * or all joined), so a request that repeats a header a rate limit is built from is refused with a
 * 400: the value counted is the one value the upstream can see.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const RULES = `domain: keys
descriptors:
  - { key: api_key, rate_limit: { unit: minute, requests_per_unit: 2 } }
  - { key: user, rate_limit: { unit: minute, requests_per_unit: 2 } }
`;

const CONFIG = (upstream: string) => `listen: 0
upstreams: { app: "${upstream}" }
domain: keys
routes:
  - match: { prefix: /keyed }
    upstream: app
    rate_limits: [{ actions: [{ request_headers: { header_name: x-api-key, descriptor_key: api_key } }] }]
  - match: { prefix: /counted-after }
    upstream: app
    rate_limits: [{ actions: [{ request_headers: { header_name: authorization, descriptor_key: user } }], apply_on_stream_done: true }]
  - match: { prefix: / }
    upstream: app
`;

const clock = new TestClock();
let upstream: Upstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(CONFIG(upstream.url), RULES, { clock });
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

/** Status of each request, and how many reached the upstream. */
async function run(path: string, headerSets: ReadonlyArray<Record<string, string | string[]>>): Promise<{ statuses: number[]; served: number }> {
  const before = upstream.requests.length;
  const statuses: number[] = [];
  for (const headers of headerSets) statuses.push((await send(gateway.url(path), { headers })).status);
  return { statuses, served: upstream.requests.length - before };
}

describe('duplicate request headers against a request_headers limit', () => {
  it('K spent, then K with a second x-api-key line each time: refused, never served (before: 5 of 5 served)', async () => {
    expect(await run('/keyed', [{ 'x-api-key': 'K' }, { 'x-api-key': 'K' }, { 'x-api-key': 'K' }])).toEqual({ statuses: [200, 200, 429], served: 2 });
    const attack = Array.from({ length: 5 }, (_, n) => ({ 'x-api-key': ['K', `r${n}`] }));
    expect(await run('/keyed', attack)).toEqual({ statuses: [400, 400, 400, 400, 400], served: 0 });
  });

  it('the 400 names the header; any case of its name counts as the same header', async () => {
    const answer = await send(gateway.url('/keyed'), { headers: { 'X-Api-Key': ['fresh', 'other'] } });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'bad_request', message: expect.stringContaining('x-api-key') });
  });

  it('a header node keeps only the first line of (authorization) is refused as well, stream-done limits included', async () => {
    expect(await run('/counted-after', [{ authorization: ['Bearer a', 'Bearer b'] }])).toEqual({ statuses: [400], served: 0 });
  });

  it('one line with a comma is one value (envoy\'s too), and repeats of headers no limit reads pass', async () => {
    expect(await run('/keyed', [{ 'x-api-key': 'L, r1' }, { 'x-api-key': 'L, r1' }, { 'x-api-key': 'L, r1' }])).toEqual({ statuses: [200, 200, 429], served: 2 });
    expect(await run('/keyed', [{ 'x-api-key': 'M', accept: ['text/plain', 'application/json'] }])).toEqual({ statuses: [200], served: 1 });
    expect(await run('/other', [{ 'x-api-key': ['N', 'r1'] }])).toEqual({ statuses: [200], served: 1 });
  });
});
