/**
 * Shaping at the gateway: a route with `shaping: { max_delay }` over a leaky-bucket rule holds each
 * request for its turn in the queue instead of refusing it, and refuses (429) only the requests
 * whose turn is further off than max_delay. The decisions are made on a clock the test holds (all
 * at one instant, so each request's turn is exact); the holding is real time, checked with
 * generous bounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckEvent } from '../../src/service/context.js';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

// 10 per second: one request every 100 ms; the bucket holds 20, max_delay lets 6 wait (0..500 ms).
const RULES = `domain: shaped
descriptors:
  - key: generic_key
    value: outflow
    rate_limit: { unit: second, requests_per_unit: 10, algorithm: leaky-bucket, burst: 20 }
  - key: generic_key
    value: meter
    rate_limit: { unit: second, requests_per_unit: 1, algorithm: leaky-bucket, burst: 20 }
`;

let upstream: Upstream;
let gateway: TestGateway;
const arrivals: { tag: string; at: number }[] = [];

beforeAll(async () => {
  upstream = await startUpstream((req, res) => {
    arrivals.push({ tag: String(req.headers['x-tag']), at: performance.now() });
    req.resume();
    res.end('ok');
  });
  const config = (path: string, extra: string, value: string) => `  - match: { prefix: ${path} }
    upstream: app
    domain: shaped
${extra}    rate_limits: [{ actions: [{ generic_key: { descriptor_value: ${value} } }] }]
`;
  gateway = await startTestGateway(
    `listen: 0\nupstreams: { app: "${upstream.url}" }\nroutes:\n${config('/shaped', '    on_limit: shape\n    shaping: { max_delay: 500ms }\n', 'outflow')}${config('/metered', '', 'meter')}`,
    RULES,
    { clock: new TestClock() },
  );
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

describe('gateway shaping', () => {
  it('holds requests to a steady outflow, up to max_delay, and refuses the rest', async () => {
    const delays: number[] = [];
    const onCheck = (event: CheckEvent): void => {
      if (event.result.overallCode === 'OK') delays.push(event.result.statuses[0]!.delay!);
    };
    gateway.gateway.service.context.events.on('check', onCheck);
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send(gateway.url('/shaped'), { headers: { 'x-tag': String(i) } })));
    gateway.gateway.service.context.events.off('check', onCheck);

    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(6);
    expect(statuses.filter((status) => status === 429)).toHaveLength(4);
    // Each admitted request waits for the ones queued before it: 100 ms more each.
    expect(delays.sort((a, b) => a - b)).toEqual([0, 100, 200, 300, 400, 500]);
    // Held for real: timers never fire early, so the i-th request reaches the upstream no sooner
    // than its turn, i × 100 ms after the burst was sent (later is allowed: the machine may be busy).
    const times = arrivals.map((arrival) => arrival.at - started).sort((a, b) => a - b);
    expect(times).toHaveLength(6);
    for (let i = 1; i < times.length; i++) expect(times[i]!).toBeGreaterThanOrEqual(i * 100 - 2);
  });

  it('without shaping, a leaky bucket is a meter: what fits passes at once, whatever its turn', async () => {
    const started = performance.now();
    // One per second: shaped, the 5th request would wait 4 s for its turn.
    for (let i = 0; i < 5; i++) expect((await send(gateway.url('/metered'))).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(4_000);
  });
});
