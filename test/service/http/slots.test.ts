/**
 * Concurrency slots through the decision service: two `tollgate serve` processes on one Redis, a
 * slot acquired on one and released on the other; refusals with Retry-After; bad bodies refused
 * with a 400 that names the field, and no slot taken by them.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { firstSnapshot } from '../../support/observability.js';
import { useRedisServer } from '../../support/redis-topologies.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

const redis = useRedisServer();
let services: ServiceProcess[] = [];

const RULES = 'domain: api\ndescriptors:\n  - key: tenant\n    concurrency: { limit: 1, ttl: 30s }\n';

beforeAll(async () => {
  const config = mkdtempSync(join(tmpdir(), 'tollgate-slots-'));
  writeFileSync(join(config, 'api.yaml'), RULES);
  // What the store answers, not how fast: past the 50 ms default a loaded machine's release was
  // answered by the failure mode (a second release then answered true).
  const args = ['--config', config, '--redis', redis.url, '--deadline-ms', '5000'];
  services = await Promise.all([startServiceProcess(args), startServiceProcess(args)]);
  return async () => void (await Promise.all(services.map((service) => service.stop())));
}, 60_000);

async function post(service: ServiceProcess, path: string, body: unknown) {
  const response = await fetch(service.url(path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

describe('POST /v1/acquire and /v1/release', () => {
  it('holds at most the limit across nodes; a release on another node frees the slot; a second release answers false', async () => {
    const [a, b] = services as [ServiceProcess, ServiceProcess];
    const key = `svc-${Date.now()}`;
    const first = await post(a, '/v1/acquire', { key, limit: 2, ttl: '1m' });
    const second = await post(b, '/v1/acquire', { key, limit: 2, ttl: 60_000 });
    expect([first.status, first.body.held, second.status, second.body.held]).toEqual([200, 1, 200, 2]);
    const refused = await post(a, '/v1/acquire', { key, limit: 2, ttl: '1m' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ allowed: false, held: 2 });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(59);
    expect((await post(b, '/v1/release', { key, id: first.body.id })).body).toEqual({ released: true });
    expect((await post(a, '/v1/release', { key, id: first.body.id })).body).toEqual({ released: false });
    const again = await post(a, '/v1/acquire', { key, limit: 2, ttl: '1m', id: 'client-chosen-1' });
    expect([again.status, again.body.id, again.body.held]).toEqual([200, 'client-chosen-1', 2]);
  });

  it.each([
    ['not an object', [1], /the body must be/],
    ['an unknown field', { key: 'k', limit: 1, ttl: '1s', cost: 1 }, /unknown field "cost"/],
    ['no limit', { key: 'k', ttl: '1s' }, /acquire: limit/],
    ['a negative limit', { key: 'k', limit: -1, ttl: '1s' }, /acquire: limit/],
    ['a ttl without a unit', { key: 'k', limit: 1, ttl: '10' }, /acquire: ttl/],
    ['an empty key', { key: '', limit: 1, ttl: '1s' }, /key is empty/],
    ['a bad id', { key: 'k', limit: 1, ttl: '1s', id: 'a b' }, /permit id/],
  ])('refuses an acquire with %s: 400, no slot taken', async (_what, body, message) => {
    const refused = await post(services[0]!, '/v1/acquire', body);
    expect(refused.status).toBe(400);
    expect(String(refused.body.message)).toMatch(message);
    // Nothing was taken: the one slot is free.
    const granted = await post(services[0]!, '/v1/acquire', { key: 'k', limit: 1, ttl: '1s' });
    expect(granted.status).toBe(200);
    expect((await post(services[0]!, '/v1/release', { key: 'k', id: granted.body.id })).body).toEqual({ released: true });
  });

  it('refuses a release without an id, or with extra fields, with a 400', async () => {
    expect((await post(services[0]!, '/v1/release', { key: 'k' })).status).toBe(400);
    expect((await post(services[0]!, '/v1/release', { key: 'k', id: 'x', limit: 1 })).status).toBe(400);
    expect((await post(services[0]!, '/v1/release', '{not json')).status).toBe(400);
  });

  it("with { domain, descriptors }: the rules' concurrency limits, across nodes, released by id on another node", async () => {
    const [a, b] = services as [ServiceProcess, ServiceProcess];
    const request = { domain: 'api', descriptors: [{ tenant: `t-${Date.now()}` }, { other: 'x' }] };
    const granted = await post(a, '/v1/acquire', request);
    expect(granted.status).toBe(200);
    expect(granted.body).toMatchObject({ allowed: true, statuses: [{ allowed: true, held: 1, limit: 1, rule: 'api.tenant' }, null] });
    const refused = await post(b, '/v1/acquire', request);
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([429, '30']);
    expect((await post(b, '/v1/release', { ...request, id: granted.body.id })).body).toEqual({ released: 1 });
    expect((await post(a, '/v1/acquire', request)).status).toBe(200);
    expect((await post(a, '/v1/acquire', { domain: 'api', descriptors: 'no' })).status).toBe(400);
    expect((await post(a, '/v1/acquire', { domain: 'api', descriptors: [], key: 'k' })).status).toBe(400);
  });

  it('counts acquires, releases and the slots held in /metrics', async () => {
    const service = services[0]!;
    const key = `metrics-${Date.now()}`;
    const granted = await post(service, '/v1/acquire', { key, limit: 1, ttl: '1m' });
    await post(service, '/v1/acquire', { key, limit: 1, ttl: '1m' });
    const text = await (await fetch(service.admin('/metrics'))).text();
    const value = (series: string): number => Number(new RegExp(`^${series.replace(/[{}"]/g, '\\$&')} (\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
    expect(value('tollgate_slot_acquires_total{result="granted"}')).toBeGreaterThanOrEqual(1);
    expect(value('tollgate_slot_acquires_total{result="refused"}')).toBeGreaterThanOrEqual(1);
    const heldBefore = value('tollgate_slots_held');
    expect(heldBefore).toBeGreaterThanOrEqual(1);
    await post(service, '/v1/release', { key, id: granted.body.id });
    const after = await (await fetch(service.admin('/metrics'))).text();
    expect(after).toMatch(/^tollgate_slot_releases_total\{result="released"\} [1-9]/m);
    expect(Number(/^tollgate_slots_held (\d+)/m.exec(after)?.[1]), `before:\n${text}\nafter:\n${after}`).toBe(heldBefore - 1);
    // And on the dashboard's cards.
    const snapshot = await firstSnapshot(service, (s) => (s.totals as { slotsReleased: number }).slotsReleased >= 1);
    expect(snapshot.totals).toMatchObject({ slotsGranted: expect.any(Number), slotsRefused: expect.any(Number) });
    const totals = snapshot.totals as Record<string, number>;
    expect([totals.slotsGranted! >= 1, totals.slotsRefused! >= 1]).toEqual([true, true]);
  });
});
