/**
 * Nothing invisible (issue 17 item 6), over real HTTP on the real service: `/v1/limit` decisions and
 * checks of unknown domains are counted on /metrics (exactly, and unknown domains by name, capped),
 * the dashboard's snapshot reconciles checks and decisions, shows latency, unknown domains and
 * `/v1/limit`, and lists no `blocked` key; a block names its domain or applies to all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNKNOWN_DOMAIN_CAP } from '../../../src/service/check/outcomes.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { decisionUrl, firstSnapshot, observabilityUrl, postJson, sampleSum, scrapeMetrics, type Sample } from '../../support/observability.js';

const TOKEN = 'visibility-admin-token';
const LIMIT_POLICY = { algorithm: 'fixed-window', limit: 3, window: '1h' };

async function start(): Promise<RunningService> {
  return startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', 'admin-token': TOKEN }, {}));
}

/** Starts a service before the suite's tests, closes it after them. */
/** One service for the enclosing describe block: started before its tests, closed after them. */
function serviceForSuite(): { readonly service: RunningService } {
  let running: RunningService | undefined;
  beforeAll(async () => {
    running = await start();
  });
  afterAll(async () => {
    await running?.close();
  });
  return {
    get service(): RunningService {
      if (running === undefined) throw new Error('the suite service is not started yet');
      return running;
    },
  };
}

const check = (service: RunningService, domain: string, descriptors: Record<string, string>[]): Promise<number> => postJson(decisionUrl(service, '/v1/check'), { domain, descriptors });
const limit = (service: RunningService, key: string): Promise<number> => postJson(decisionUrl(service, '/v1/limit'), { key, policy: LIMIT_POLICY });
const block = (service: RunningService, body: Record<string, unknown>): Promise<number> => postJson(observabilityUrl(service, '/v1/keys/block'), body, { authorization: `Bearer ${TOKEN}` });

/** How much `name{labels}` grew between two scrapes. */
function grew(before: readonly Sample[], after: readonly Sample[], name: string, labels: Record<string, string>): number {
  return sampleSum(after, name, labels) - sampleSum(before, name, labels);
}

describe('metrics: /v1/limit and unknown domains', () => {
  const suite = serviceForSuite();

  it('counts every /v1/limit decision: checks by result, decisions by reason, latency', async () => {
    const before = (await scrapeMetrics(suite.service)).samples;
    const codes: number[] = [];
    for (let i = 0; i < 5; i++) codes.push(await limit(suite.service, 'user:limit-metrics'));
    expect(codes).toEqual([200, 200, 200, 429, 429]);
    const after = (await scrapeMetrics(suite.service)).samples;
    const labels = { domain: '(v1/limit)', transport: 'limit' };
    expect(grew(before, after, 'tollgate_checks_total', { ...labels, result: 'ok' })).toBe(3);
    expect(grew(before, after, 'tollgate_checks_total', { ...labels, result: 'over_limit' })).toBe(2);
    const rule = { domain: '(v1/limit)', rule: '(v1/limit)' };
    expect(grew(before, after, 'tollgate_decisions_total', { ...rule, result: 'ok', reason: 'within_limit' })).toBe(3);
    expect(grew(before, after, 'tollgate_decisions_total', { ...rule, result: 'over_limit', reason: 'limit_exceeded' })).toBe(2);
    expect(grew(before, after, 'tollgate_check_duration_seconds_count', { transport: 'limit' })).toBe(5);
  });

  it('counts a /v1/limit key blocked in all domains as blocked', async () => {
    expect(await block(suite.service, { key: 'user:blocked-metrics', ttlMs: 60_000 })).toBe(200);
    const before = (await scrapeMetrics(suite.service)).samples;
    expect(await limit(suite.service, 'user:blocked-metrics')).toBe(429);
    const after = (await scrapeMetrics(suite.service)).samples;
    expect(grew(before, after, 'tollgate_decisions_total', { rule: '(v1/limit)', result: 'over_limit', reason: 'blocked' })).toBe(1);
  });

  it('counts checks of unknown domains by that domain', async () => {
    const before = (await scrapeMetrics(suite.service)).samples;
    for (let i = 0; i < 3; i++) expect(await check(suite.service, 'rate-limit-typo', [{ remote_address: '192.0.2.1' }])).toBe(200);
    for (let i = 0; i < 2; i++) expect(await check(suite.service, 'envoy-misconfigured', [{ user: 'x' }])).toBe(200);
    const after = (await scrapeMetrics(suite.service)).samples;
    expect(grew(before, after, 'tollgate_unknown_domain_checks_total', { domain: 'rate-limit-typo' })).toBe(3);
    expect(grew(before, after, 'tollgate_unknown_domain_checks_total', { domain: 'envoy-misconfigured' })).toBe(2);
    expect(grew(before, after, 'tollgate_checks_total', { domain: '(unknown)' })).toBe(5);
  });
});

describe('metrics: unknown domains are capped', () => {
  it(`names at most ${UNKNOWN_DOMAIN_CAP} domains and counts the rest as "(other)"`, async () => {
    const service = await start();
    try {
      const sent = UNKNOWN_DOMAIN_CAP + 25;
      for (let i = 0; i < sent; i++) expect(await check(service, `random-${i}-${Math.random().toString(36).slice(2)}`, [{ a: 'b' }])).toBe(200);
      const series = (await scrapeMetrics(service)).samples.filter((s) => s.name === 'tollgate_unknown_domain_checks_total');
      expect(series).toHaveLength(UNKNOWN_DOMAIN_CAP + 1);
      expect(sampleSum(series, 'tollgate_unknown_domain_checks_total', { domain: '(other)' })).toBe(25);
      expect(sampleSum(series, 'tollgate_unknown_domain_checks_total')).toBe(sent);
    } finally {
      await service.close();
    }
  });
});

describe('dashboard snapshot: cards that add up, nothing invisible', () => {
  const suite = serviceForSuite();

  it('reconciles checks and decisions, and shows /v1/limit, unknown domains and latency', async () => {
    // 4 hybrid checks of two descriptors each (8 decisions); 2 per-ip checks; 5 /v1/limit (2 over);
    // 3 checks of an unknown domain (no decision); 1 check denied by an all-domains block.
    for (let i = 0; i < 4; i++) expect(await check(suite.service, 'hybrid', [{ user_id: `u${i}` }, { remote_address: '198.51.100.1' }])).toBe(200);
    for (let i = 0; i < 2; i++) expect(await check(suite.service, 'per_ip', [{ remote_address: '198.51.100.2' }])).toBe(200);
    for (let i = 0; i < 5; i++) await limit(suite.service, 'user:dashboard');
    for (let i = 0; i < 3; i++) expect(await check(suite.service, 'typo-domain', [{ remote_address: '198.51.100.3' }])).toBe(200);
    expect(await block(suite.service, { key: 'remote_address=198.51.100.66', ttlMs: 60_000 })).toBe(200);
    expect(await check(suite.service, 'per_ip', [{ remote_address: '198.51.100.66' }])).toBe(429);

    const snapshot = await firstSnapshot(suite.service, (s) => (s.totals as { checks: number }).checks === 15);
    const totals = snapshot.totals as Record<string, number>;
    expect(totals).toMatchObject({ checks: 15, allowedChecks: 12, deniedChecks: 3, limitChecks: 5, unknownDomain: 3 });
    expect(totals.checks).toBe(totals.allowedChecks! + totals.deniedChecks!);
    // Decisions: 8 hybrid + 2 per-ip + 5 /v1/limit + 1 blocked = 16: allowed 13, over limit 3.
    expect(totals).toMatchObject({ allowed: 13, throttled: 3, unmatched: 3 });
    expect(snapshot.unknownDomains).toEqual([['typo-domain', 3]]);
    const rules = snapshot.rules as { rule: string; allowed: number; throttled: number }[];
    expect(rules.find((r) => r.rule === '(v1/limit)')).toMatchObject({ allowed: 3, throttled: 2 });
    expect(rules.find((r) => r.rule === 'blocked')).toMatchObject({ throttled: 1 });
    // The throttled keys: the /v1/limit key; the block is in the block list, not a key.
    const keys = (snapshot.topKeys as { key: string; throttled: number }[]).map((k) => k.key);
    expect(keys).toEqual(['user:dashboard']);
    const latency = snapshot.latency as { p50Ms: number; p99Ms: number; count: number };
    expect(latency.count).toBe(15);
    expect(latency.p50Ms).toBeGreaterThan(0);
    expect(latency.p99Ms).toBeGreaterThanOrEqual(latency.p50Ms);
    expect(snapshot.workers).toBeNull();
  });
});

describe('block scope', () => {
  const suite = serviceForSuite();

  it('a block of one domain denies that domain only; an all-domains block also /v1/limit', async () => {
    expect(await block(suite.service, { key: 'remote_address=203.0.113.50', domain: 'per_ip', ttlMs: 60_000 })).toBe(200);
    expect(await check(suite.service, 'per_ip', [{ remote_address: '203.0.113.50' }])).toBe(429);
    expect(await check(suite.service, 'hybrid', [{ remote_address: '203.0.113.50' }])).toBe(200);
    expect(await block(suite.service, { key: 'user:scoped', domain: 'per_ip', ttlMs: 60_000 })).toBe(200);
    expect(await limit(suite.service, 'user:scoped')).toBe(200);
    expect(await block(suite.service, { key: 'user:everywhere', ttlMs: 60_000 })).toBe(200);
    expect(await limit(suite.service, 'user:everywhere')).toBe(429);
    const listed = (await (await fetch(observabilityUrl(suite.service, '/v1/keys/blocked'), { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { blocked: { key: string; domain: string }[] };
    expect(listed.blocked.map(({ key, domain }) => `${domain} ${key}`).sort()).toEqual(['* user:everywhere', 'per_ip remote_address=203.0.113.50', 'per_ip user:scoped']);
  });

  it.each([[''], [42], ['two\nlines'], ['d'.repeat(300)]])('refuses the domain %j with a 400', async (domain) => {
    expect(await block(suite.service, { key: 'k', domain, ttlMs: 1_000 })).toBe(400);
  });
});
