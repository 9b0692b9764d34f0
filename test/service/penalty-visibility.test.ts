/**
 * Penalties (`block_duration`) as the decision service shows them, over real HTTP and gRPC:
 * envoy's answers (`/json`, gRPC ShouldRateLimit) say a block refused the check in the
 * `tollgate-blocked` header of `response_headers_to_add`, their statuses keeping envoy's fields
 * only; `/metrics` counts the refusals during a block (reason `blocked`) apart from plain
 * over-limit denials, and the blocks started; the dashboard shows both; `GET /rlconfig` shows each
 * limit's block_duration and the domain's allow and deny lists.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { rateLimitClient, type RateLimitClient } from '../support/grpc-client.js';
import { firstSnapshot, sampleSum, scrapeMetrics } from '../support/observability.js';

const RULES = `domain: pen
allow:
  - key: remote_address
    values: ['10.0.0.0/8', '2001:db8:cafe::/48']
  - key: api_key
    values: [internal-batch]
deny:
  - key: remote_address
    values: [203.0.113.7]
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, block_duration: 1h }
  - key: account
    rate_limit: { unit: minute, requests_per_unit: 1, block_duration: 10m }
  - key: ip
    rate_limit: { unit: hour, requests_per_unit: 1 }
`;
const TOKEN = 'penalty-visibility-token';
/** envoy's DescriptorStatus fields in proto3 JSON (envoy.service.ratelimit.v3). */
const ENVOY_STATUS_FIELDS = ['code', 'currentLimit', 'limitRemaining', 'durationUntilReset', 'quota'];

let dir: string;
let service: RunningService;
let grpc: RateLimitClient;
let base: string;
let adminBase: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-penalty-visibility-'));
  writeFileSync(join(dir, 'pen.yaml'), RULES);
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent', 'admin-token': TOKEN }, {}));
  base = `http://127.0.0.1:${service.httpPort!}`;
  adminBase = `http://127.0.0.1:${service.adminPort}`;
  grpc = rateLimitClient(service.grpcPort!);
});

afterAll(async () => {
  grpc?.close();
  await service?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function post(path: string, body: unknown): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

const envoyJson = (key: string, value: string) => post('/json', { domain: 'pen', descriptors: [{ entries: [{ key, value }] }] });
const envoyGrpc = (key: string, value: string) => grpc.shouldRateLimit({ domain: 'pen', descriptors: [{ entries: [{ key, value }] }] });

/** The `/metrics` samples of `name` with these labels, summed (0 when none). */
async function sample(name: string, labels: Record<string, string>): Promise<number> {
  return sampleSum((await scrapeMetrics(service)).samples, name, labels);
}

describe('envoy answers say a block refused the check', () => {
  it("/json: the tollgate-blocked header and responseHeadersToAdd entry, seconds to the block's end; statuses keep envoy's fields only", async () => {
    const first = await envoyJson('user', 'alice');
    expect(first.status).toBe(200);
    expect(first.headers.get('tollgate-blocked')).toBeNull();
    expect(first.body.responseHeadersToAdd).toBeUndefined();
    // The denial that starts the hour's block, then one during it: both say so.
    for (const answer of [await envoyJson('user', 'alice'), await envoyJson('user', 'alice')]) {
      expect(answer.status).toBe(429);
      const seconds = Number(answer.headers.get('tollgate-blocked'));
      expect(seconds).toBeGreaterThan(3_590);
      expect(seconds).toBeLessThanOrEqual(3_600);
      expect(answer.body.responseHeadersToAdd).toEqual([{ key: 'tollgate-blocked', value: String(seconds) }]);
      const statuses = answer.body.statuses as Record<string, unknown>[];
      expect(statuses).toMatchObject([{ code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }]);
      for (const field of Object.keys(statuses[0]!)) expect(ENVOY_STATUS_FIELDS).toContain(field);
    }
    // A plain over-limit denial (no penalty) carries no such header.
    expect((await envoyJson('ip', '192.0.2.1')).status).toBe(200);
    const plain = await envoyJson('ip', '192.0.2.1');
    expect(plain.status).toBe(429);
    expect(plain.headers.get('tollgate-blocked')).toBeNull();
    expect(plain.body.responseHeadersToAdd).toBeUndefined();
  });

  it('gRPC ShouldRateLimit: tollgate-blocked in response_headers_to_add on a refusal by a block, never on a plain one', async () => {
    const first = await envoyGrpc('user', 'bob');
    expect(first.overall_code).toBe('OK');
    expect(first.response_headers_to_add).toEqual([]);
    for (const answer of [await envoyGrpc('user', 'bob'), await envoyGrpc('user', 'bob')]) {
      expect(answer.overall_code).toBe('OVER_LIMIT');
      expect(answer.statuses).toMatchObject([{ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 1, unit: 'MINUTE' } }]);
      expect(answer.response_headers_to_add.map(({ key, value }) => ({ key, value }))).toEqual([{ key: 'tollgate-blocked', value: expect.stringMatching(/^(359\d|3600)$/) }]);
    }
    expect((await envoyGrpc('ip', '192.0.2.2')).overall_code).toBe('OK');
    const plain = await envoyGrpc('ip', '192.0.2.2');
    expect(plain.overall_code).toBe('OVER_LIMIT');
    expect(plain.response_headers_to_add).toEqual([]);
  });

  it('/v1/check: blocked: true on the status and the tollgate-blocked header; a block set by hand says the same', async () => {
    const check = (user: string) => post('/v1/check', { domain: 'pen', descriptors: [{ user }] });
    expect((await check('carol')).status).toBe(200);
    const denied = await check('carol');
    expect(denied.status).toBe(429);
    expect(denied.body.statuses).toMatchObject([{ code: 'OVER_LIMIT', blocked: true, rule: 'pen.user' }]);
    expect(Number(denied.headers.get('tollgate-blocked'))).toBeGreaterThan(3_590);
    const blockedByHand = await fetch(`${adminBase}/v1/keys/block`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ key: 'user=dave', ttlMs: 120_000, domain: 'pen' }) });
    expect(blockedByHand.status).toBe(200);
    const byHand = await envoyJson('user', 'dave');
    expect(byHand.status).toBe(429);
    expect(byHand.headers.get('tollgate-blocked')).toMatch(/^1[12]\d$/);
    expect(byHand.body.responseHeadersToAdd).toEqual([{ key: 'tollgate-blocked', value: byHand.headers.get('tollgate-blocked') }]);
  });
});

describe.each(['envoy', 'full'])('with --response-headers %s', (mode) => {
  it('tollgate-blocked comes once, beside the headers asked for', async () => {
    const other = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent', 'response-headers': mode }, {}));
    try {
      const json = async () => {
        const response = await fetch(`http://127.0.0.1:${other.httpPort!}/json`, { method: 'POST', body: JSON.stringify({ domain: 'pen', descriptors: [{ entries: [{ key: 'user', value: 'erin' }] }] }) });
        return { headers: response.headers, body: (await response.json()) as { responseHeadersToAdd?: { key: string; value: string }[] } };
      };
      expect((await json()).body.responseHeadersToAdd!.map((h) => h.key)).not.toContain('tollgate-blocked');
      const denied = await json();
      const keys = denied.body.responseHeadersToAdd!.map((h) => h.key.toLowerCase());
      expect(keys.filter((key) => key === 'tollgate-blocked')).toHaveLength(1);
      expect(keys).toContain(mode === 'envoy' ? 'ratelimit-limit' : 'retry-after');
      expect(Number(denied.headers.get('tollgate-blocked'))).toBeGreaterThan(3_590);
    } finally {
      await other.close();
    }
  });
});

describe('GET /rlconfig', () => {
  it("shows each limit's block_duration and the domain's allow and deny lists", async () => {
    const text = await (await fetch(`${adminBase}/rlconfig`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    const lines = text.split('\n');
    expect(lines).toContain('pen.user: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false, algorithm: fixed-window, block_duration: 1h');
    expect(lines).toContain('pen.account: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false, algorithm: fixed-window, block_duration: 10m');
    // A limit without a penalty says nothing of one.
    expect(lines).toContain('pen.ip: unit=HOUR requests_per_unit=1, shadow_mode: false, quota_mode: false, algorithm: fixed-window');
    // The lists, deny first, one line per list and key, the values as written; the path is the rule a list decision names.
    expect(lines.filter((line) => /^pen\.(allow|deny)\./.test(line))).toEqual([
      'pen.deny.remote_address: values=["203.0.113.7"]',
      'pen.allow.remote_address: values=["10.0.0.0/8","2001:db8:cafe::/48"]',
      'pen.allow.api_key: values=["internal-batch"]',
    ]);
    const listed = await post('/v1/check', { domain: 'pen', descriptors: [{ remote_address: '203.0.113.7' }] });
    expect(listed.body.statuses).toMatchObject([{ rule: 'pen.deny.remote_address', list: 'deny' }]);
  });
});

describe('blocks in the metrics and on the dashboard', () => {
  it('count a block started and the refusals during it apart from plain over-limit denials', async () => {
    const rule = { domain: 'pen', rule: 'pen.account' };
    const blocked = { ...rule, result: 'over_limit', reason: 'blocked' };
    const exceeded = { ...rule, result: 'over_limit', reason: 'limit_exceeded' };
    const before = {
      started: await sample('tollgate_blocks_started_total', rule),
      blocked: await sample('tollgate_decisions_total', blocked),
      exceeded: await sample('tollgate_decisions_total', exceeded),
    };
    // Two accounts: each admitted once, then denied by its quota (a block starts), then refused by
    // the block: 3 times for one, over /json, gRPC and /v1/check; once for the other.
    for (const [account, during] of [['acme', 3], ['globex', 1]] as const) {
      expect((await envoyJson('account', account)).status).toBe(200);
      expect((await envoyJson('account', account)).status).toBe(429);
      for (let i = 0; i < during; i++) {
        if (i % 3 === 0) expect((await envoyJson('account', account)).status).toBe(429);
        else if (i % 3 === 1) expect((await envoyGrpc('account', account)).overall_code).toBe('OVER_LIMIT');
        else expect((await post('/v1/check', { domain: 'pen', descriptors: [{ account }] })).status).toBe(429);
      }
    }
    expect((await sample('tollgate_blocks_started_total', rule)) - before.started).toBe(2);
    expect((await sample('tollgate_decisions_total', blocked)) - before.blocked).toBe(4);
    // The denials that started the blocks were the quota's: limit_exceeded, as a plain denial.
    expect((await sample('tollgate_decisions_total', exceeded)) - before.exceeded).toBe(2);
    // A limit without a penalty starts none.
    expect(await sample('tollgate_blocks_started_total', { domain: 'pen', rule: 'pen.ip' })).toBe(0);
    expect(await sample('tollgate_decisions_total', { domain: 'pen', rule: 'pen.ip', result: 'over_limit', reason: 'limit_exceeded' })).toBe(2);
  });

  it('the dashboard shows the refusals by a block and the penalties started', async () => {
    // Every check of this file so far: blocks started for alice, bob, carol, acme, globex; refused
    // by a block: alice 1, bob 1, dave 1 (by hand), acme 3, globex 1. A snapshot may fall between
    // globex's block starting and its refusal (a busy machine): wait for both totals, then the exact ones.
    const reached = (totals: Record<string, number>): boolean => totals.blocksStarted! >= 5 && totals.blocked! >= 7;
    const snapshot = await firstSnapshot(service, (shown) => reached(shown.totals as Record<string, number>));
    const totals = snapshot.totals as Record<string, number>;
    expect(totals).toMatchObject({ blocksStarted: 5, blocked: 7 });
    const page = await (await fetch(`${adminBase}/dashboard`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(page).toContain('id="rate-blocked"');
    expect(page).toContain('id="blocks-started-total"');
  });
});
