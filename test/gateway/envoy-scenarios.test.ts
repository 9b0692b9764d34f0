/**
 * envoyproxy/ratelimit's integration-test scenarios (integration-test/scripts/*.sh), reproduced
 * through `tollgate gateway`: the same routes (fixtures/envoy-routes.yaml, from its example envoy
 * proxy) and limits (fixtures/envoy-rules.yaml), the same request sequences, and what its scripts
 * assert: each status in order, and the stats where they read stats (mapped to our /metrics). Each
 * scenario gets its own gateway, on a clock the test holds (its "wait a minute" is a step of the
 * clock, and no window can roll over mid-scenario).
 *
 * Left out: multiservice-tokenquota.sh, whose point is envoy routing each request to the service
 * that still has quota (dynamic metadata and load balancer subsets), not rate limiting.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const RULES = readFileSync(new URL('fixtures/envoy-rules.yaml', import.meta.url), 'utf8');
const ROUTES = readFileSync(new URL('fixtures/envoy-routes.yaml', import.meta.url), 'utf8');

let upstream: Upstream;
let gateway: TestGateway | undefined;
let clock: TestClock;

beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(() => upstream.close());
afterEach(async () => {
  await gateway?.close();
  gateway = undefined;
});

async function start(): Promise<TestGateway> {
  clock = new TestClock();
  gateway = await startTestGateway(ROUTES.replace('mock: UPSTREAM', `mock: ${JSON.stringify(upstream.url)}`), RULES, { clock });
  return gateway;
}

/** The statuses of `count` requests to `path` with `headers`, one after the other. */
async function statuses(path: string, headers: Record<string, string>, count = 1): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) seen.push((await send(gateway!.url(path), { headers })).status);
  return seen;
}

describe("envoyproxy/ratelimit's integration scenarios through the gateway", () => {
  it('simple-get: a request within its limits reaches the upstream', async () => {
    await start();
    const answer = await send(gateway!.url('/twoheader'), { headers: { foo: 'test', baz: 'shady' } });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('upstream GET /twoheader');
  });

  it('trigger-ratelimit: (foo: *, baz: not-so-shady) at 3 per minute refuses the 4th and 5th with 429 Too Many Requests', async () => {
    await start();
    const headers = { foo: 'pelle', baz: 'not-so-shady' };
    expect(await statuses('/twoheader', headers, 5)).toEqual([200, 200, 200, 429, 429]);
  });

  it('trigger-shadow-mode-key: a shadow-mode limit never refuses, and an over-limit shadow limit does not report remaining 0', async () => {
    await start();
    const headers = { foo: 'pelle', baz: 'shady' };
    expect(await statuses('/twoheader', headers, 5)).toEqual([200, 200, 200, 200, 200]);
    const sixth = await send(gateway!.url('/twoheader'), { headers });
    expect(sixth.status).toBe(200);
    // The script fails when x-ratelimit-remaining is "0": the shadow limit's state is not shown.
    expect(sixth.headers['x-ratelimit-remaining']).not.toBe('0');
    const metrics = await (await fetch(gateway!.admin('/metrics'))).text();
    expect(metrics).toMatch(/tollgate_shadow_mode_hits_total\{domain="rl",rule="rl\.foo\.baz=shady"\} 3/);
  });

  it('replaces: a replacing limit lifts the named one, leaves other requests under it, and one limit can replace several', async () => {
    await start();
    const banned = { foo: 'bkthomps', bar: 'banned' };
    expect(await statuses('/twoheader', banned)).toEqual([429]);
    expect(await statuses('/fourheader', { ...banned, source_cluster: 'proxy', destination_cluster: 'mock' })).toEqual([429]);
    expect(await statuses('/fourheader', { ...banned, source_cluster: 'proxy', destination_cluster: 'override' }, 3)).toEqual([200, 200, 429]);

    const named = { foo: 'my_foo', bar: 'bkthomps', source_cluster: 'proxy' };
    expect(await statuses('/fourheader', { ...named, destination_cluster: 'bkthomps' }, 3)).toEqual([200, 200, 429]);
    expect(await statuses('/fourheader', { ...named, destination_cluster: 'not_bkthomps' }, 2)).toEqual([200, 429]);
    expect(await statuses('/fourheader', { ...named, destination_cluster: 'bkthomps' })).toEqual([429]);

    const account = { ...named, destination_cluster: 'fake', category: 'account' };
    expect(await statuses('/fiveheader', account, 5)).toEqual([200, 200, 200, 200, 429]);
    expect(await statuses('/twoheader', { foo: 'foo_2', bar: 'bkthomps' }, 2)).toEqual([200, 429]);
    expect(await statuses('/fourheader', { foo: 'foo_3', bar: 'bar_3', source_cluster: 'proxy', destination_cluster: 'fake' }, 3)).toEqual([200, 200, 429]);
    expect(await statuses('/fiveheader', account)).toEqual([429]);
  });

  it('value-included-in-stats-key-when-unspecified: a detailed_metric wildcard counts its over-limit under the request value', async () => {
    await start();
    expect(await statuses('/unspec', { unspec: 'unspecified_value' }, 3)).toEqual([200, 200, 429]);
    const metrics = await (await fetch(gateway!.admin('/metrics'))).text();
    expect(metrics).toMatch(/tollgate_decisions_total\{domain="rl",rule="rl\.unspec=unspecified_value",result="over_limit",reason="limit_exceeded"\} 1\n/);
  });

  it('quota: every matching quota is debited, the 3rd request is refused, and a minute later the quotas are whole', async () => {
    await start();
    expect(await statuses('/quota', {}, 3)).toEqual([200, 200, 429]);
    clock.now += 60_000;
    expect(await statuses('/quota', {})).toEqual([200]);
  });

  it('token-quota: checked before forwarding without counting, counted once the response is over: the 4th request is refused', async () => {
    const { gateway: running } = await start();
    let checks = 0;
    running.service.context.events.on('check', () => (checks += 1));
    const results: number[] = [];
    for (let i = 1; i <= 4; i++) {
      results.push(...(await statuses('/tokenquota', { 'request-no': String(i) })));
      // The stream-done count follows the response: wait for it before the next request.
      const expected = results.filter((status) => status === 200).length * 2 + results.filter((status) => status !== 200).length;
      await waitFor(() => checks >= expected);
    }
    expect(results).toEqual([200, 200, 200, 429]);
    clock.now += 60_000;
    expect(await statuses('/tokenquota', { 'request-no': '5' })).toEqual([200]);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
