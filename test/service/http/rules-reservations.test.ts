/**
 * `POST /v1/reserve` and `POST /v1/settle` in the rules' form, `{ domain, descriptors, cost, id,
 * ttl? }`, on a real `tollgate serve` process over loopback, alone (memory store) and on a real
 * Redis: each matched limit is reserved all or nothing, a settle applies the actual cost to every
 * limit reserved under the id, and every bad body is a 400 naming the fix.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useRedisServer } from '../../support/redis-topologies.js';
import { RESERVATION_RULES, orgAndUser } from '../../support/reservation-rules.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

async function post(service: ServiceProcess, path: string, body: unknown) {
  const response = await fetch(service.url(path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

const redis = useRedisServer();
const TOKEN = 'test-admin-token-0123456789';
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-reserve-service-'));
  writeFileSync(join(dir, 'tokens.yaml'), RESERVATION_RULES);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.each([
  ['alone (memory store)', (): string[] => []],
  ['on Redis', (): string[] => ['--redis', redis.url]],
] as const)('POST /v1/reserve and /v1/settle through rules, %s', (_name, storeArgs) => {
  let service: ServiceProcess;
  beforeAll(async () => {
    service = await startServiceProcess(['--config', dir, '--admin-token', TOKEN, ...storeArgs()]);
  }, 30_000);
  afterAll(async () => {
    expect(await service.stop()).toBe(0);
  });

  it('reserves every matched limit all or nothing (429 gives back), settles each once, and counts each reserve on /metrics', async () => {
    const org = `acme-${Math.random().toString(36).slice(2)}`;
    const descriptors = orgAndUser(org, 'alice');
    const first = await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 20, id: 'req-1', ttl: 60_000 });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ overallCode: 'OK', id: 'req-1', statuses: [{ limitRemaining: 80 }, { limitRemaining: 10 }] });
    const refused = await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 20, id: 'req-2' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OK', limitRemaining: 80 }, { code: 'OVER_LIMIT' }] });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // Descriptors as plain objects too, as /v1/check takes them.
    const settled = await post(service, '/v1/settle', { domain: 'tokens', descriptors: [{ org }, { org, user: 'alice' }], id: 'req-1', cost: 5 });
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({ statuses: [{ status: 'settled', reserved: 20, cost: 5, limitRemaining: 95 }, { status: 'settled', limitRemaining: 25 }] });
    expect((await post(service, '/v1/settle', { domain: 'tokens', descriptors, id: 'req-1', cost: 0 })).body).toMatchObject({ statuses: [{ status: 'repeated' }, { status: 'repeated' }] });
    // Each reserve is counted on /metrics as a check of its domain, per rule.
    const metrics = await (await fetch(service.admin('/metrics'))).text();
    expect(metrics).toMatch(/^tollgate_decisions_total\{domain="tokens",rule="tokens\.org\.user",result="ok",reason="within_limit"\} [1-9]/m);
    expect(metrics).toMatch(/^tollgate_decisions_total\{domain="tokens",rule="tokens\.org\.user",result="over_limit",reason="limit_exceeded"\} [1-9]/m);
  });

  it('a retry of a refused reserve with the same id answers 429 again and spends nothing, even once the refusing limit has room', async () => {
    const org = `retry-${Math.random().toString(36).slice(2)}`;
    const descriptors = orgAndUser(org, 'alice');
    expect((await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 20, id: 'first' })).status).toBe(200);
    expect((await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 20, id: 'second' })).status).toBe(429);
    // 'first' settled at 0: the user's budget is whole again, and the org's holds nothing of 'second'.
    expect((await post(service, '/v1/settle', { domain: 'tokens', descriptors, id: 'first', cost: 0 })).status).toBe(200);
    const retry = await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 20, id: 'second' });
    expect(retry.status).toBe(429);
    expect(retry.body).toMatchObject({ overallCode: 'OVER_LIMIT', id: 'second', statuses: [{ limitRemaining: 100 }, { limitRemaining: 30 }] });
    expect(String(retry.body.spentId)).toMatch(/reserve with a new id/);
    const fresh = await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 20, id: 'third' });
    expect(fresh.status).toBe(200);
    expect(fresh.body).toMatchObject({ overallCode: 'OK', statuses: [{ limitRemaining: 80 }, { limitRemaining: 10 }] });
  });

  it('counts each settle on /metrics, per rule and status, in both forms', async () => {
    const org = `metrics-${Math.random().toString(36).slice(2)}`;
    const descriptors = orgAndUser(org, 'alice');
    const count = async (labels: string): Promise<number> => {
      const text = await (await fetch(service.admin('/metrics'))).text();
      const line = text.split('\n').find((l) => l.startsWith(`tollgate_settles_total{${labels}} `));
      return line === undefined ? 0 : Number(line.split(' ').at(-1));
    };
    const settled = 'domain="tokens",rule="tokens.org.user",status="settled"';
    const repeated = 'domain="tokens",rule="tokens.org",status="repeated"';
    const keyForm = 'domain="(v1/limit)",rule="(v1/limit)",status="unknown"';
    const before = [await count(settled), await count(repeated), await count(keyForm)];
    expect((await post(service, '/v1/reserve', { domain: 'tokens', descriptors, cost: 5, id: 'm' })).status).toBe(200);
    expect((await post(service, '/v1/settle', { domain: 'tokens', descriptors, id: 'm', cost: 2 })).status).toBe(200);
    expect((await post(service, '/v1/settle', { domain: 'tokens', descriptors, id: 'm', cost: 2 })).status).toBe(200);
    const policy = { algorithm: 'token-bucket', limit: 10, window: '1m' };
    expect((await post(service, '/v1/settle', { key: `k-${org}`, policy, id: 'never', cost: 1 })).status).toBe(200);
    expect([await count(settled), await count(repeated), await count(keyForm)]).toEqual([before[0]! + 1, before[1]! + 1, before[2]! + 1]);
  });

  it('an entry blocked by hand is refused a reservation (429), as /v1/check refuses it, and nothing is reserved', async () => {
    const org = `blocked-${Math.random().toString(36).slice(2)}`;
    const block = await fetch(service.admin('/v1/keys/block'), { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ key: `user=mallory`, domain: 'tokens', ttlMs: 60_000 }) });
    expect(block.status).toBe(200);
    const refused = await post(service, '/v1/reserve', { domain: 'tokens', descriptors: orgAndUser(org, 'mallory'), cost: 5, id: 'r' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ overallCode: 'OVER_LIMIT', id: 'r', statuses: [{ code: 'OK' }, { code: 'OVER_LIMIT', rule: 'blocked' }] });
    // A bad body is still a 400, blocked or not.
    expect((await post(service, '/v1/reserve', { domain: 'tokens', descriptors: orgAndUser(org, 'mallory'), cost: 0, id: 'r' })).status).toBe(400);
    // Nothing was reserved on the org's budget.
    const reserved = await post(service, '/v1/reserve', { domain: 'tokens', descriptors: orgAndUser(org, 'bob'), cost: 5, id: 'b' });
    expect(reserved.body).toMatchObject({ overallCode: 'OK', statuses: [{ limitRemaining: 95 }, { limitRemaining: 25 }] });
  });

  it.each([
    ['/v1/reserve', { domain: 'tokens', descriptors: orgAndUser('o', 'u'), cost: 1 }, /id must be a string/],
    ['/v1/reserve', { domain: 'tokens', descriptors: orgAndUser('o', 'u'), cost: 0, id: 'a' }, /whole number ≥ 1/],
    ['/v1/reserve', { domain: 'tokens', descriptors: orgAndUser('o', 'u'), cost: 1, id: 'a', hits: 2 }, /unknown field "hits"/],
    ['/v1/reserve', { domain: 'tokens', descriptors: 'org=o', cost: 1, id: 'a' }, /descriptors must be an array/],
    ['/v1/reserve', { domain: 'tokens', descriptors: [{ shared: 'x' }], cost: 1, id: 'a' }, /shared capacity/],
    ['/v1/reserve', { domain: '', descriptors: [], cost: 1, id: 'a' }, /domain must be a non-empty string/],
    ['/v1/settle', { domain: 'tokens', descriptors: orgAndUser('o', 'u'), id: 'a', cost: -1 }, /whole number ≥ 0/],
    ['/v1/settle', { domain: 'tokens', descriptors: orgAndUser('o', 'u'), id: 'a', cost: 1, ttl: 5 }, /unknown field "ttl"/],
  ])('POST %s in the rules form with a bad body is a 400 that names the fix (%#)', async (path, body, message) => {
    const answer = await post(service, path, body);
    expect(answer.status).toBe(400);
    expect(String(answer.body.message)).toMatch(message);
  });
});
