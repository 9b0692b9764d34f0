/**
 * GET /metrics on the real service over real HTTP: decisions by rule, result and reason,
 * near-limit, shadow-mode hits, latency, malformed requests, store errors, rules version and
 * reloads, memory-store numbers and process metrics; one registry per service, and no label value
 * ever taken from a request.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { register as globalRegistry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { rejectionReason } from '../../../src/service/observe/metrics.js';
import { parseMetrics as parse, sampleSum as value, type Sample } from '../../support/observability.js';

const LOGIN_RULE = 'classic.action=login.user';

/** Each started service's admin listener (metrics, dashboard, events), by its decision URL. */
const adminBases = new Map<string, string>();
const admin = (base: string): string => adminBases.get(base)!;

async function start(config = 'examples/rules'): Promise<{ service: RunningService; base: string }> {
  const service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config, 'log-level': 'silent' }, {}));
  const base = `http://127.0.0.1:${service.httpPort!}`;
  adminBases.set(base, `http://127.0.0.1:${service.adminPort}`);
  return { service, base };
}

async function post(base: string, path: string, body: unknown): Promise<number> {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  await response.arrayBuffer();
  return response.status;
}

const check = (base: string, descriptors: unknown[], domain = 'classic'): Promise<number> => post(base, '/v1/check', { domain, descriptors });

async function scrape(base: string): Promise<{ text: string; samples: Sample[] }> {
  const response = await fetch(`${admin(base)}/metrics`);
  expect(response.status).toBe(200);
  const text = await response.text();
  return { text, samples: parse(text) };
}

function series(samples: readonly Sample[], name: string): Sample[] {
  return samples.filter((s) => s.name === name);
}

describe('GET /metrics', () => {
  let service: RunningService;
  let base: string;

  beforeAll(async () => {
    ({ service, base } = await start());
  });
  afterAll(async () => {
    await service.close();
  });

  it('serves the Prometheus text format from a registry of its own, with process metrics', async () => {
    const response = await fetch(`${admin(base)}/metrics`);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const samples = parse(await response.text());
    expect(series(samples, 'process_cpu_user_seconds_total')).toHaveLength(1);
    expect(series(samples, 'process_resident_memory_bytes')).toHaveLength(1);
    expect(series(samples, 'nodejs_heap_size_used_bytes')).toHaveLength(1);
    expect(series(samples, 'nodejs_eventloop_lag_seconds')).toHaveLength(1);
    // Nothing on prom-client's global registry.
    expect(globalRegistry.getSingleMetric('tollgate_decisions_total')).toBeUndefined();
    expect(globalRegistry.getSingleMetric('process_cpu_user_seconds_total')).toBeUndefined();
  });

  it('counts six login checks: five admitted (two of them near the limit), one over the limit, with latency', async () => {
    const before = (await scrape(base)).samples;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await check(base, [{ action: 'login', user: 'alice' }]));
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    const after = (await scrape(base)).samples;
    const delta = (name: string, labels: Record<string, string>) => value(after, name, labels) - value(before, name, labels);

    const login = { domain: 'classic', rule: LOGIN_RULE };
    expect(delta('tollgate_decisions_total', { ...login, result: 'ok', reason: 'within_limit' })).toBe(5);
    expect(delta('tollgate_decisions_total', { ...login, result: 'over_limit', reason: 'limit_exceeded' })).toBe(1);
    // Limit 5: the 4th leaves 1 (20%), the 5th leaves 0.
    expect(delta('tollgate_near_limit_total', login)).toBe(2);
    expect(delta('tollgate_checks_total', { domain: 'classic', transport: 'check', result: 'ok' })).toBe(5);
    expect(delta('tollgate_checks_total', { domain: 'classic', transport: 'check', result: 'over_limit' })).toBe(1);
    expect(delta('tollgate_check_duration_seconds_count', { transport: 'check' })).toBe(6);
    expect(delta('tollgate_check_duration_seconds_bucket', { transport: 'check', le: '+Inf' })).toBe(6);
    expect(delta('tollgate_check_duration_seconds_sum', { transport: 'check' })).toBeGreaterThan(0);
    expect(value(after, 'tollgate_memory_store_keys')).toBeGreaterThanOrEqual(1);
    expect(value(after, 'tollgate_memory_store_max_keys')).toBeGreaterThan(0);
    expect(series(after, 'tollgate_memory_store_evictions_total')).toHaveLength(1);
    expect(series(after, 'tollgate_memory_store_expired_total')).toHaveLength(1);
  });

  it('labels envoy /json checks by their transport', async () => {
    const before = (await scrape(base)).samples;
    expect(await post(base, '/json', { domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '198.51.100.1' }] }] })).toBe(200);
    const after = (await scrape(base)).samples;
    expect(value(after, 'tollgate_checks_total', { transport: 'json', domain: 'per_ip' }) - value(before, 'tollgate_checks_total', { transport: 'json', domain: 'per_ip' })).toBe(1);
    expect(value(after, 'tollgate_decisions_total', { rule: 'per_ip.remote_address', result: 'ok' })).toBeGreaterThanOrEqual(1);
  });

  it('says why: another limit denied the request, no rule matched, or the domain is unknown', async () => {
    const before = (await scrape(base)).samples;
    // hybrid: 60 a minute per user, 300 per IP. 61 hits deny on the user; the IP limit would admit.
    expect(await check(base, [{ entries: [{ key: 'user_id', value: 'u-61' }], hitsAddend: 61 }, { entries: [{ key: 'remote_address', value: '192.0.2.61' }] }], 'hybrid')).toBe(429);
    expect(await check(base, [{ nothing: 'matches-zz9' }])).toBe(200);
    expect(await check(base, [{ user: 'mallory-zz9' }], 'no-such-domain-zz9')).toBe(200);
    const { text, samples: after } = await scrape(base);
    const delta = (labels: Record<string, string>) => value(after, 'tollgate_decisions_total', labels) - value(before, 'tollgate_decisions_total', labels);
    expect(delta({ rule: 'hybrid.user_id', result: 'over_limit', reason: 'limit_exceeded' })).toBe(1);
    expect(delta({ rule: 'hybrid.remote_address', result: 'ok', reason: 'other_limit_exceeded' })).toBe(1);
    expect(delta({ domain: 'classic', rule: '(none)', result: 'ok', reason: 'no_rule' })).toBe(1);
    expect(delta({ domain: '(unknown)', rule: '(none)', result: 'ok', reason: 'unknown_domain' })).toBe(1);
    expect(value(after, 'tollgate_checks_total', { domain: '(unknown)' })).toBeGreaterThanOrEqual(1);
    // Request values never become labels, but for the unknown domain in its own, capped, counter.
    expect(text.split('\n').filter((line) => line.includes('zz9'))).toEqual(['tollgate_unknown_domain_checks_total{domain="no-such-domain-zz9"} 1']);
    expect(text).not.toContain('alice');
    expect(text).not.toContain('192.0.2.61');
  });

  it('counts checks denied by a block set by hand under the rule "blocked"', async () => {
    const before = (await scrape(base)).samples;
    service.context.blocks.block('user=mallory-zz7', 60_000);
    try {
      expect(await check(base, [{ action: 'login', user: 'mallory-zz7' }])).toBe(429);
      expect(await check(base, [{ user: 'mallory-zz7' }], 'no-such-domain-zz7')).toBe(429);
    } finally {
      service.context.blocks.unblock('user=mallory-zz7');
    }
    const { text, samples: after } = await scrape(base);
    const delta = (labels: Record<string, string>) => value(after, 'tollgate_decisions_total', labels) - value(before, 'tollgate_decisions_total', labels);
    expect(delta({ domain: 'classic', rule: 'blocked', result: 'over_limit', reason: 'blocked' })).toBe(1);
    expect(delta({ domain: '(unknown)', rule: 'blocked', result: 'over_limit', reason: 'blocked' })).toBe(1);
    expect(text.split('\n').filter((line) => line.includes('zz7'))).toEqual(['tollgate_unknown_domain_checks_total{domain="no-such-domain-zz7"} 1']);
  });

  it('counts malformed requests by transport and a bounded reason', async () => {
    const before = (await scrape(base)).samples;
    expect(await post(base, '/v1/check', '{ not json')).toBe(400);
    expect(await post(base, '/v1/check', { domain: 5, descriptors: [] })).toBe(400);
    expect(await post(base, '/v1/check', { domain: 'classic', descriptors: [], secret: 'zz8' })).toBe(400);
    expect(await post(base, '/v1/check', 'x'.repeat(1024 * 1024 + 10))).toBe(413);
    service.context.events.emit('rejected', { via: 'grpc', reason: 'descriptors[0].entries must be an array' });
    const { text, samples: after } = await scrape(base);
    const delta = (labels: Record<string, string>) => value(after, 'tollgate_rejected_requests_total', labels) - value(before, 'tollgate_rejected_requests_total', labels);
    expect(delta({ transport: 'http', reason: 'invalid_json' })).toBe(1);
    expect(delta({ transport: 'http', reason: 'invalid_request' })).toBe(2);
    expect(delta({ transport: 'http', reason: 'body_too_large' })).toBe(1);
    expect(delta({ transport: 'grpc', reason: 'invalid_request' })).toBe(1);
    expect(text).not.toContain('zz8');
  });

  it('puts rejection messages in a few fixed reasons', () => {
    expect(rejectionReason('the body is not valid JSON: Unexpected token')).toBe('invalid_json');
    expect(rejectionReason('the body is 2000000 bytes; at most 1048576 are accepted')).toBe('body_too_large');
    expect(rejectionReason('the body is over 1048576 bytes')).toBe('body_too_large');
    expect(rejectionReason('PUT /v1/rules:3:7: descriptors[0].rate_limit.unit: unknown unit')).toBe('invalid_rules');
    expect(rejectionReason('domain must be a non-empty string, got 5')).toBe('invalid_request');
  });

  it('counts store errors by kind, at most 16 kinds and then "other"', async () => {
    const events = service.context.events;
    events.emit('storeError', { kind: 'unavailable' });
    events.emit('storeError', { kind: 'unavailable' });
    events.emit('storeError', { kind: 'has spaces and "quotes"' });
    for (let i = 0; i < 40; i++) events.emit('storeError', { kind: `kind_${i}` });
    const { samples } = await scrape(base);
    const kinds = series(samples, 'tollgate_store_errors_total');
    expect(value(samples, 'tollgate_store_errors_total', { kind: 'unavailable' })).toBe(2);
    expect(kinds.length).toBeLessThanOrEqual(17);
    expect(value(samples, 'tollgate_store_errors_total')).toBe(43);
    expect(value(samples, 'tollgate_store_errors_total', { kind: 'other' })).toBeGreaterThanOrEqual(1 + 40 - 15);
  });

  it('gives the rules version and their size', async () => {
    const { samples } = await scrape(base);
    const info = series(samples, 'tollgate_rules_info');
    expect(info).toHaveLength(1);
    expect(info[0]!.labels.version).toBe(service.context.holder.current.version);
    expect(info[0]!.value).toBe(1);
    expect(value(samples, 'tollgate_rules_domains')).toBe(6);
    expect(value(samples, 'tollgate_rules_rules')).toBeGreaterThanOrEqual(10);
    expect(series(samples, 'tollgate_rules_reloads_total').map((s) => `${s.labels.source}/${s.labels.result}`).sort()).toEqual(['watcher/applied', 'watcher/refused']);
  });
});

describe('GET /metrics with shadow-mode rules and reloads', () => {
  let dir: string;
  let service: RunningService;
  let base: string;
  const rules = (limit: number) => `domain: shadowed\ndescriptors:\n  - key: tenant\n    shadow_mode: true\n    rate_limit: { unit: minute, requests_per_unit: ${limit} }\n`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-metrics-'));
    writeFileSync(join(dir, 'shadowed.yaml'), rules(2));
    ({ service, base } = await start(dir));
  });
  afterAll(async () => {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts shadow-mode hits: over the limit, reported, admitted', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await check(base, [{ tenant: 't-1' }], 'shadowed'));
    expect(statuses).toEqual([200, 200, 200, 200]);
    const { samples } = await scrape(base);
    const rule = { domain: 'shadowed', rule: 'shadowed.tenant' };
    expect(value(samples, 'tollgate_shadow_mode_hits_total', rule)).toBe(2);
    expect(value(samples, 'tollgate_decisions_total', { ...rule, result: 'shadow_over_limit', reason: 'shadow_mode' })).toBe(2);
    expect(value(samples, 'tollgate_decisions_total', { ...rule, result: 'ok', reason: 'within_limit' })).toBe(2);
    expect(value(samples, 'tollgate_checks_total', { domain: 'shadowed', result: 'ok' })).toBe(4);
  });

  it('follows the watcher: refused reloads keep the version, applied ones change it', async () => {
    const watcher = service.context.watcher!;
    const first = await scrape(base);
    const version = service.context.holder.current.version;
    const counted = (samples: Sample[], result: string) => value(samples, 'tollgate_rules_reloads_total', { source: 'watcher', result });

    writeFileSync(join(dir, 'shadowed.yaml'), 'domain: shadowed\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n');
    await watcher.reload();
    const refused = (await scrape(base)).samples;
    expect(counted(refused, 'refused') - counted(first.samples, 'refused')).toBe(1);
    expect(value(refused, 'tollgate_rules_reload_failing', { source: 'watcher' })).toBe(1);
    expect(series(refused, 'tollgate_rules_info').map((s) => s.labels.version)).toEqual([version]);

    writeFileSync(join(dir, 'shadowed.yaml'), rules(3));
    await watcher.reload();
    const applied = (await scrape(base)).samples;
    expect(counted(applied, 'applied') - counted(first.samples, 'applied')).toBe(1);
    expect(value(applied, 'tollgate_rules_reload_failing', { source: 'watcher' })).toBe(0);
    const info = series(applied, 'tollgate_rules_info');
    expect(info).toHaveLength(1);
    expect(info[0]!.labels.version).not.toBe(version);
    expect(info[0]!.labels.version).toBe(service.context.holder.current.version);
    // Counters never go down between scrapes.
    expect(counted(applied, 'refused')).toBeGreaterThanOrEqual(counted(refused, 'refused'));
  });
});

describe('metrics per service', () => {
  it('keeps two services apart and stops listening on close', async () => {
    const a = await start();
    const b = await start();
    try {
      for (let i = 0; i < 3; i++) expect(await check(a.base, [{ action: 'login', user: 'carol' }])).toBe(200);
      expect(value((await scrape(a.base)).samples, 'tollgate_decisions_total', { rule: LOGIN_RULE })).toBe(3);
      expect(value((await scrape(b.base)).samples, 'tollgate_decisions_total', { rule: LOGIN_RULE })).toBe(0);
    } finally {
      await a.service.close();
      await b.service.close();
    }
    for (const event of ['check', 'rejected', 'storeError'] as const) expect(a.service.context.events.listenerCount(event)).toBe(0);
  });
});
