/**
 * `Retry-After` on the rules paths is the decision's `retryAfter` rounded up to whole seconds, not
 * the time until the limit is whole again (`durationUntilReset`): a token bucket refills one token
 * long before it is full. Pinned for each of the six algorithms over real HTTP, on every path that
 * decides by rules: the middleware in rules mode, the service's `/v1/check` and the gateway, each
 * on a controlled clock and held to what the same rules decide in process at the same instant.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALGORITHM_CATALOG } from '../../src/algorithms/catalog.js';
import { createLimiter, memoryStore } from '../../src/index.js';
import { compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse/index.js';
import type { DescriptorStatus } from '../../src/rules/check.js';
import { resolveServiceOptions, startService, type RunningService } from '../../src/service/index.js';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';
import { startApp, type RunningApp } from '../support/http-apps.js';

/** Mid-minute, so a minute's window has 30 s left: neither end of it. */
const NOW = Date.UTC(2030, 0, 1, 0, 0, 30, 250);
/** 60 a minute: one a second; the buckets hold 5, so a denied request waits 1 s where the bucket takes 5 to fill. */
const ALGORITHMS = ALGORITHM_CATALOG.map(({ name, usesBurst }) => ({ algorithm: name, extra: usesBurst ? ', burst: 5' : '' }));
const RULES = `domain: api
descriptors:
${ALGORITHMS.map(({ algorithm, extra }) => `  - { key: ${algorithm}, rate_limit: { unit: minute, requests_per_unit: 60, algorithm: ${algorithm}${extra} } }`).join('\n')}
`;

/** The denied status the same rules give in process after `admitted` requests at NOW. */
async function expectedDenial(algorithm: string): Promise<{ status: DescriptorStatus; admitted: number }> {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(RULES, 'rules.yaml')) });
  try {
    for (let admitted = 0; admitted < 100; admitted++) {
      const { statuses } = await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: algorithm, value: 'u' }] }], now: NOW });
      if (statuses[0]!.code === 'OVER_LIMIT') return { status: statuses[0]!, admitted };
    }
    throw new Error(`${algorithm} never denied`);
  } finally {
    await limiter.close();
  }
}

const seconds = (ms: number): string => String(Math.max(1, Math.ceil(ms / 1000)));

/** Sends requests until one is refused; that one's `retry-after`, and the body. */
async function firstRefusal(request: () => Promise<{ status: number; retryAfter: string | null; body: string }>): Promise<{ admitted: number; retryAfter: string | null; body: string }> {
  for (let admitted = 0; admitted < 100; admitted++) {
    const answer = await request();
    if (answer.status === 429) return { admitted, retryAfter: answer.retryAfter, body: answer.body };
    expect(answer.status).toBe(200);
  }
  throw new Error('never refused');
}

describe.each(ALGORITHMS)('$algorithm: Retry-After is the wait for the next request, in whole seconds', ({ algorithm, extra }) => {
  let expected: { status: DescriptorStatus; admitted: number };
  beforeAll(async () => {
    expected = await expectedDenial(algorithm);
    if (extra !== '') {
      // The case the header got wrong: the next token in 1 s, the bucket whole in 5.
      expect(expected.status.retryAfter).toBeLessThanOrEqual(1_000);
      expect(expected.status.durationUntilReset).toBeGreaterThanOrEqual(4_000);
    }
  });

  it('the middleware in rules mode', async () => {
    const app: RunningApp = await startApp('express', [
      { rules: compileRules(parseRules(RULES, 'rules.yaml')), domain: 'api', clock: () => NOW, descriptors: () => [{ entries: [{ key: algorithm, value: 'u' }] }] },
    ]);
    try {
      const refused = await firstRefusal(async () => {
        const response = await fetch(`${app.url}/hello`);
        return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
      });
      expect(refused.admitted).toBe(expected.admitted);
      expect(refused.retryAfter).toBe(seconds(expected.status.retryAfter!));
      expect(JSON.parse(refused.body)).toMatchObject({ retryAfter: Number(seconds(expected.status.retryAfter!)) });
    } finally {
      await app.close();
    }
  });

  it('the service\'s /v1/check: the header agrees with the body\'s retryAfter', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-retry-after-'));
    writeFileSync(join(dir, 'api.yaml'), RULES);
    const service: RunningService = await startService(
      resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0' }, {}),
      pino({ level: 'silent' }),
      { clock: () => NOW },
    );
    try {
      const refused = await firstRefusal(async () => {
        const response = await fetch(`http://127.0.0.1:${service.httpPort!}/v1/check`, { method: 'POST', body: JSON.stringify({ domain: 'api', descriptors: [{ [algorithm]: 'u' }] }) });
        return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
      });
      const status = (JSON.parse(refused.body) as { statuses: DescriptorStatus[] }).statuses[0]!;
      expect(refused.admitted).toBe(expected.admitted);
      expect(status.retryAfter).toBe(expected.status.retryAfter);
      expect(refused.retryAfter).toBe(seconds(status.retryAfter!));
    } finally {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('the gateway', () => {
    let upstream: Upstream;
    let gateway: TestGateway;
    beforeAll(async () => {
      upstream = await startUpstream();
      const config = `listen: 0
upstreams: { app: "${upstream.url}" }
routes:
  - match: { prefix: / }
    upstream: app
    domain: api
    rate_limits: [{ actions: [{ generic_key: { descriptor_key: ${algorithm}, descriptor_value: u } }] }]
`;
      gateway = await startTestGateway(config, RULES, { clock: new TestClock(NOW) });
    });
    afterAll(async () => {
      await gateway?.close();
      await upstream?.close();
    });

    it('the header and the 429\'s "retry in"', async () => {
      const refused = await firstRefusal(async () => {
        const answer = await send(gateway.url('/hello'));
        return { status: answer.status, retryAfter: (answer.headers['retry-after'] as string | undefined) ?? null, body: answer.body };
      });
      expect(refused.admitted).toBe(expected.admitted);
      expect(refused.retryAfter).toBe(seconds(expected.status.retryAfter!));
      expect(refused.body).toContain(`Retry in ${seconds(expected.status.retryAfter!)} s.`);
    });
  });
});
