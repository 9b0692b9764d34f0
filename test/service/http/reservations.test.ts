/**
 * `POST /v1/reserve` and `POST /v1/settle` on a real `tollgate serve` process over loopback: the
 * answers of reserve then settle (a retry counts once, a settle refunds, a repeat changes nothing)
 * and a 400 naming the fix for every bad body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

async function post(service: ServiceProcess, path: string, body: unknown) {
  const response = await fetch(service.url(path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

const policy = { algorithm: 'token-bucket', limit: 10, window: '1h' };
const TOKEN = 'test-admin-token-0123456789';

describe('POST /v1/reserve and /v1/settle', () => {
  let service: ServiceProcess;

  beforeAll(async () => {
    service = await startServiceProcess(['--config', 'examples/rules', '--admin-token', TOKEN]);
  }, 20_000);

  afterAll(async () => {
    expect(await service.stop()).toBe(0);
  });

  it('a reserve debits the estimate once per id, a settle refunds the difference once', async () => {
    const first = await post(service, '/v1/reserve', { key: 'tokens:alice', policy, cost: 8, id: 'req-1', ttl: 60_000 });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ allowed: true, limit: 10, remaining: 2 });
    expect(first.headers.get('ratelimit-remaining') ?? first.headers.get('x-ratelimit-remaining')).toBe('2');
    // A retry (a lost answer, say) answers the first decision and counts nothing more.
    expect((await post(service, '/v1/reserve', { key: 'tokens:alice', policy, cost: 8, id: 'req-1' })).body).toEqual(first.body);
    const refused = await post(service, '/v1/reserve', { key: 'tokens:alice', policy, cost: 5, id: 'req-2' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ allowed: false, remaining: 2 });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);

    const settled = await post(service, '/v1/settle', { key: 'tokens:alice', policy, id: 'req-1', cost: 3 });
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({ status: 'settled', reserved: 8, cost: 3, decision: { allowed: true, remaining: 7 } });
    expect((await post(service, '/v1/settle', { key: 'tokens:alice', policy, id: 'req-1', cost: 0 })).body).toMatchObject({ status: 'repeated', reserved: 8, cost: 3, decision: { remaining: 7 } });
    expect((await post(service, '/v1/settle', { key: 'tokens:alice', policy, id: 'never', cost: 1 })).body).toMatchObject({ status: 'unknown', decision: { remaining: 7 } });
    expect((await post(service, '/v1/reserve', { key: 'tokens:alice', policy, cost: 5, id: 'req-2' })).body).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('a key blocked by hand is refused a reservation (429, reason blocked), as /v1/limit refuses it', async () => {
    const block = await fetch(service.admin('/v1/keys/block'), { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ key: 'tokens:mallory', ttlMs: 60_000 }) });
    expect(block.status).toBe(200);
    const refused = await post(service, '/v1/reserve', { key: 'tokens:mallory', policy, cost: 1, id: 'r' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ allowed: false, reason: 'blocked' });
    expect((await post(service, '/v1/settle', { key: 'tokens:mallory', policy, id: 'r', cost: 0 })).body).toMatchObject({ status: 'unknown' });
  });

  it.each([
    ['/v1/reserve', [], /the body must be \{ key, policy, cost, id, ttl \}/],
    ['/v1/reserve', { key: 'k', policy, cost: 1, id: 'a', tll: 5 }, /unknown field "tll"/],
    ['/v1/reserve', { key: 'k', policy, cost: 1 }, /id must be a string/],
    ['/v1/reserve', { key: 'k', policy, cost: '1', id: 'a' }, /cost must be a whole number/],
    ['/v1/reserve', { key: 'k', policy: { algorithm: 'fixed-window', limit: 1, window: '1s', share: { group: 'g', weight: 1 } }, cost: 1, id: 'a' }, /shared capacity/],
    ['/v1/reserve', { policy, cost: 1, id: 'a' }, /key must be a string/],
    ['/v1/settle', { key: 'k', policy, id: 'a', cost: -2 }, /whole number ≥ 0/],
    ['/v1/settle', { key: 'k', policy: { algorithm: 'nope' }, id: 'a', cost: 1 }, /algorithm/],
    ['/v1/settle', '{"key": ', /JSON/i],
  ])('POST %s with a bad body is a 400 that names the fix (%#)', async (path, body, message) => {
    const answer = await post(service, path, body);
    expect(answer.status).toBe(400);
    expect(String(answer.body.message)).toMatch(message);
  });
});
