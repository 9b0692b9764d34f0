/**
 * Allow and deny lists and penalties through the decision service, over real HTTP: a denied
 * address is refused with 429 and its status names the list; an allowed one is never limited; the
 * metrics and the dashboard count both lists; a rule's block_duration and a /v1/limit policy's
 * blockDuration answer `blocked` until the block's end.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';

const RULES = `domain: api
allow:
  - key: remote_address
    values: ['10.0.0.0/8']
deny:
  - key: remote_address
    values: ['203.0.113.0/24', '2001:db8:bad::/48']
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, block_duration: 1h }
`;

let dir: string;
let service: RunningService;
let base: string;
let adminBase: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-lists-service-'));
  writeFileSync(join(dir, 'api.yaml'), RULES);
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent' }, {}));
  base = `http://127.0.0.1:${service.httpPort!}`;
  adminBase = `http://127.0.0.1:${service.adminPort}`;
});

afterAll(async () => {
  await service?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const envoyCheck = (key: string, value: string) => post('/json', { domain: 'api', descriptors: [{ entries: [{ key, value }] }] });

describe('lists in the decision service', () => {
  it('refuse a denied address with 429, its status naming the list; never limit an allowed one', async () => {
    const denied = await envoyCheck('remote_address', '203.0.113.9');
    expect(denied.status).toBe(429);
    expect(denied.body).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT' }] });
    // Tollgate's own answer names the list.
    const named = await post('/v1/check', { domain: 'api', descriptors: [{ remote_address: '203.0.113.10' }] });
    expect(named).toMatchObject({ status: 429, body: { statuses: [{ code: 'OVER_LIMIT', rule: 'api.deny.remote_address', list: 'deny' }] } });
    expect((await envoyCheck('remote_address', '2001:db8:bad::1')).status).toBe(429);
    for (let i = 0; i < 5; i++) expect((await envoyCheck('remote_address', '10.20.30.40')).status).toBe(200);
    // Off the lists, the limit of one a minute applies.
    expect((await envoyCheck('remote_address', '192.0.2.1')).status).toBe(200);
    expect((await envoyCheck('remote_address', '192.0.2.1')).status).toBe(429);
  });

  it('are counted in the metrics and on the dashboard', async () => {
    const metrics = await (await fetch(`${adminBase}/metrics`)).text();
    expect(metrics).toMatch(/tollgate_decisions_total\{domain="api",rule="api\.deny\.remote_address",result="over_limit",reason="deny_list"\} 3/);
    expect(metrics).toMatch(/tollgate_decisions_total\{domain="api",rule="api\.allow\.remote_address",result="ok",reason="allow_list"\} 5/);
    // A snapshot's totals are of closed seconds: under load the allows may close a second after the denials.
    const totals = await dashboardTotals((counts) => counts.denyListed! >= 3 && counts.allowListed! >= 5);
    expect(totals).toMatchObject({ allowListed: 5, denyListed: 3 });
  });
});

describe('penalties in the decision service', () => {
  it("a rule's block_duration holds the descriptor over the limit for the block, not the window", async () => {
    const eve = () => post('/v1/check', { domain: 'api', descriptors: [{ user: 'eve' }] });
    expect((await eve()).status).toBe(200);
    const denied = await eve();
    expect(denied.status).toBe(429);
    // A minute's limit, an hour's block: the retry is the block's end (the exact end: test/limiter/penalties.test.ts).
    const status = (denied.body.statuses as { retryAfter: number; durationUntilReset: number; blocked?: boolean }[])[0]!;
    // The denial that starts the block says so, as every denial during it does.
    expect(status.blocked).toBe(true);
    expect((await eve()).body.statuses).toMatchObject([{ code: 'OVER_LIMIT', blocked: true }]);
    expect(status.retryAfter).toBeGreaterThan(3_590_000);
    expect(status.retryAfter).toBeLessThanOrEqual(3_600_000);
  });

  it("a /v1/limit policy's blockDuration answers reason blocked and the block's end", async () => {
    // An hour's window: the two calls never straddle a window boundary (a 1 s window did, once in CI).
    const policy = { algorithm: 'fixed-window', limit: 1, window: '1h', blockDuration: '30s' };
    expect((await post('/v1/limit', { key: 'penalised', policy })).status).toBe(200);
    const denied = await post('/v1/limit', { key: 'penalised', policy });
    expect(denied.status).toBe(429);
    expect(denied.body).toMatchObject({ allowed: false, reason: 'blocked' });
    expect(denied.body.retryAfter as number).toBeGreaterThan(29_000);
    expect((await post('/v1/limit', { key: 'penalised', policy: { ...policy, blockDuration: '31d' } })).status).toBe(400);
  });
});

/** The totals of the first dashboard snapshot (GET /v1/events, one a second) where `ready` holds. */
async function dashboardTotals(ready: (totals: Record<string, number>) => boolean): Promise<Record<string, number>> {
  const controller = new AbortController();
  const response = await fetch(`${adminBase}/v1/events`, { signal: controller.signal });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the event stream ended before a snapshot: ${text}`);
      text += decoder.decode(value, { stream: true });
      const blocks = text.split('\n\n');
      text = blocks.pop()!;
      for (const block of blocks) {
        const data = /^data: (.*)$/m.exec(block)?.[1];
        const totals = data === undefined ? undefined : (JSON.parse(data) as { totals?: Record<string, number> }).totals;
        if (totals !== undefined && ready(totals)) return totals;
      }
    }
  } finally {
    controller.abort();
  }
}
