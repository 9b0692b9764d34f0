/**
 * End to end over HTTP: the real CLI in a child process, memory store then Redis (two nodes), driven
 * over loopback: decisions and headers, health, rules replace and push, admin auth, bad requests
 * (never a crash, never a counter change), graceful shutdown.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computePeriod } from '../../../src/algorithms/calendar.js';
import { startRedis } from '../../support/redis.js';
import { useRedisServer } from '../../support/redis-topologies.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

const TOKEN = 'test-admin-token-0123456789';
const login = (user: string) => ({ domain: 'classic', descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', value: user }] }] });

/** POSTs JSON to the decision listener, or to the admin listener for the admin API (`/v1/keys...`). */
async function post(service: ServiceProcess, path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(path.startsWith('/v1/keys') ? service.admin(path) : service.url(path), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

describe('tollgate serve, memory store', () => {
  let service: ServiceProcess;

  beforeAll(async () => {
    service = await startServiceProcess(['--config', 'examples/rules', '--admin-token', TOKEN]);
  }, 20_000);

  afterAll(async () => {
    expect(await service.stop()).toBe(0);
    expect(service.logs.some((line) => line.msg === 'stopped')).toBe(true);
  });

  it('POST /json answers as envoyproxy/ratelimit does: 200 until the limit, then 429, proto3 JSON, no headers unless asked', async () => {
    for (let i = 0; i < 5; i++) {
      const ok = await post(service, '/json', login('alice'));
      expect(ok.status).toBe(200);
      expect(ok.body.overallCode).toBe('OK');
    }
    const denied = await post(service, '/json', login('alice'));
    expect(denied.status).toBe(429);
    expect(denied.body).toMatchObject({
      overallCode: 'OVER_LIMIT',
      statuses: [{ code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 5, unit: 'MINUTE' } }],
    });
    // proto3 JSON leaves a zero out: limitRemaining 0 is not written.
    const status = (denied.body.statuses as Record<string, unknown>[])[0]!;
    expect(status).not.toHaveProperty('limitRemaining');
    expect(String(status.durationUntilReset)).toMatch(/^\d+s$/);
    expect(denied.body).not.toHaveProperty('responseHeadersToAdd');
    expect(denied.headers.get('x-ratelimit-limit')).toBeNull();
    // /v1/check, Tollgate's own, always carries the headers.
    const check = await post(service, '/v1/check', login('alice'));
    expect(check.status).toBe(429);
    expect(check.headers.get('x-ratelimit-limit')).toBe('5');
    expect(check.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(Number(check.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(check.headers.get('ratelimit-policy')).toMatch(/^"classic\.action=login\.user";q=5;w=60;pk=:[A-Za-z0-9+/]{16}:$/);
  });

  it('POST /v1/check takes a friendlier shape; POST /v1/limit decides a key directly', async () => {
    const check = await post(service, '/v1/check', { domain: 'classic', descriptors: [{ action: 'login', user: 'bob' }] });
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({ overallCode: 'OK', statuses: [{ code: 'OK', limitRemaining: 4, rule: 'classic.action=login.user' }] });
    const policy = { algorithm: 'token-bucket', limit: 1, window: '1m' };
    expect((await post(service, '/v1/limit', { key: 'k', policy })).status).toBe(200);
    const denied = await post(service, '/v1/limit', { key: 'k', policy });
    expect(denied.status).toBe(429);
    expect(denied.body).toMatchObject({ allowed: false, limit: 1, remaining: 0 });
    expect(denied.headers.get('retry-after')).toBe('60');
  });

  it('health: /healthz live, /readyz ready with the rules version', async () => {
    expect((await fetch(service.url('/healthz'))).status).toBe(200);
    const ready = await fetch(service.url('/readyz'));
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', store: 'memory', domains: ['classic', 'hierarchy', 'hybrid', 'per_api_key', 'per_ip', 'per_user'] });
  });

  it('PUT /v1/rules needs the admin token, refuses invalid YAML whole, and applies valid domains', async () => {
    const yaml = 'domain: extra\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n';
    const put = (body: string, token?: string) =>
      fetch(service.admin('/v1/rules'), { method: 'PUT', headers: { 'content-type': 'application/yaml', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body });
    expect((await put(yaml)).status).toBe(401);
    expect((await put(yaml, 'wrong-token-0123456789')).status).toBe(401);
    const before = (await (await fetch(service.admin('/v1/rules'))).json()) as { version: string };
    const invalid = await put(yaml.replace('minute', 'fortnight'), TOKEN);
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { message: string }).message).toMatch(/PUT \/v1\/rules:4:\d+: descriptors\[0\]\.rate_limit\.unit/);
    expect(((await (await fetch(service.admin('/v1/rules'))).json()) as { version: string }).version).toBe(before.version);
    const applied = await put(yaml, TOKEN);
    expect(applied.status).toBe(200);
    const rules = (await (await fetch(service.admin('/v1/rules'))).json()) as { domains: string[] };
    expect(rules.domains).toContain('extra');
    expect(rules.domains).toContain('classic');
    const extra = { domain: 'extra', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] };
    expect((await post(service, '/json', extra)).status).toBe(200);
    expect((await post(service, '/json', extra)).status).toBe(429);
  });

  it('admin key endpoints: 401 without the token, inspect and reset with it', async () => {
    const query = '/v1/keys?key=k&algorithm=token-bucket&limit=1&window=1m';
    expect((await fetch(service.admin(query))).status).toBe(401);
    const auth = { authorization: `Bearer ${TOKEN}` };
    const inspected = (await (await fetch(service.admin(query), { headers: auth })).json()) as { decision: { allowed: boolean } };
    expect(inspected.decision.allowed).toBe(false);
    expect((await fetch(service.admin(query), { method: 'DELETE', headers: auth })).status).toBe(200);
    expect((await post(service, '/v1/limit', { key: 'k', policy: { algorithm: 'token-bucket', limit: 1, window: '1m' } })).status).toBe(200);
  });

  it('POST /v1/limit and the admin key endpoints take a sliding window\'s precision', async () => {
    const policy = { algorithm: 'sliding-window', limit: 2, window: '1h', precision: 60 };
    expect((await post(service, '/v1/limit', { key: 'p', policy })).body).toMatchObject({ allowed: true, remaining: 1 });
    const auth = { authorization: `Bearer ${TOKEN}` };
    const look = async (precision: string) => fetch(service.admin(`/v1/keys?key=p&algorithm=sliding-window&limit=2&window=1h${precision}`), { headers: auth });
    // A look of cost 1: the 60-bucket state holds one hit, precision 1 is another state, still whole.
    expect(((await (await look('&precision=60')).json()) as { decision: { remaining: number } }).decision.remaining).toBe(0);
    expect(((await (await look('')).json()) as { decision: { remaining: number } }).decision.remaining).toBe(1);
    expect((await look('&precision=ten')).status).toBe(400);
    expect((await post(service, '/v1/limit', { key: 'p', policy: { ...policy, precision: 101 } })).status).toBe(400);
  });

  it('POST /v1/limit takes a calendar window in a time zone, and refuses an unknown zone or another algorithm with a 400 saying what to write', async () => {
    const policy = { algorithm: 'fixed-window', limit: 1, window: 'month', timeZone: 'Europe/Paris' };
    const first = await post(service, '/v1/limit', { key: 'calendar', policy });
    expect(first.body).toMatchObject({ allowed: true, remaining: 0 });
    expect(first.body.resetAt).toBe(computePeriod('month', 'Europe/Paris', first.body.now as number).end);
    expect((await post(service, '/v1/limit', { key: 'calendar', policy })).status).toBe(429);
    const look = await fetch(service.admin('/v1/keys?key=calendar&algorithm=fixed-window&limit=1&window=month&timeZone=Europe/Paris'), { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await look.json()) as { decision: { remaining: number; resetAt: number } }).decision).toMatchObject({ remaining: 0, resetAt: first.body.resetAt });
    const unknownZone = await post(service, '/v1/limit', { key: 'calendar', policy: { ...policy, timeZone: 'Paris' } });
    expect(unknownZone.status).toBe(400);
    expect(unknownZone.body.message).toMatch(/timeZone "Paris" is not a time zone .*'Europe\/Paris'/);
    const bucket = await post(service, '/v1/limit', { key: 'calendar', policy: { ...policy, algorithm: 'token-bucket' } });
    expect(bucket.status).toBe(400);
    expect(bucket.body.message).toMatch(/applies to fixed-window only/);
  });

  it('blocks a key or a descriptor entry by hand, until it expires or is unblocked', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect((await post(service, '/v1/keys/block', { key: 'user=mallory' })).status).toBe(401);
    expect((await post(service, '/v1/keys/block', { key: 'user=mallory', ttlMs: 60_000 }, auth)).status).toBe(200);
    expect((await post(service, '/v1/keys/block', { key: 'abuser', ttlMs: 60_000 }, auth)).status).toBe(200);
    expect((await post(service, '/v1/keys/block', { key: 'x', ttlMs: -5 }, auth)).status).toBe(400);
    const blocked = await post(service, '/v1/check', login('mallory'));
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(50);
    const limit = await post(service, '/v1/limit', { key: 'abuser', policy: { algorithm: 'gcra', limit: 100, window: '1s' } });
    expect(limit.status).toBe(429);
    expect(limit.body).toMatchObject({ allowed: false, reason: 'blocked' });
    const list = (await (await fetch(service.admin('/v1/keys/blocked'), { headers: auth })).json()) as { blocked: { key: string }[] };
    expect(list.blocked.map((b) => b.key).sort()).toEqual(['abuser', 'user=mallory']);
    expect((await fetch(service.admin('/v1/keys/block?key=user%3Dmallory'), { method: 'DELETE', headers: auth })).status).toBe(200);
    expect((await post(service, '/json', login('mallory'))).status).toBe(200);
  });

  it.each([
    ['malformed JSON', '{"domain": ', 400, /not valid JSON/],
    ['missing domain', { descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] }, 400, /domain must be a non-empty string/],
    ['empty descriptors', { domain: 'classic', descriptors: [] }, 400, /descriptors must be a non-empty array/],
    ['unknown field', { domain: 'classic', descriptors: [{ entries: [] }], colour: 'red' }, 400, /unknown field "colour"/],
    ['non-integer hits', { domain: 'classic', descriptors: [{ entries: [] }], hitsAddend: 1.5 }, 400, /hits_addend must be a whole number/],
    ['entry without a key', { domain: 'classic', descriptors: [{ entries: [{ value: 'x' }] }] }, 400, /entries\[0\] must be/],
  ] as const)('POST /json with %s is a 400 that changes no counter', async (name, body, status, message) => {
    const user = `untouched-${name}`;
    expect((await post(service, '/json', login(user))).body).toMatchObject({ statuses: [{ limitRemaining: 4 }] });
    const response = await post(service, '/json', body);
    expect(response.status).toBe(status);
    expect(String(response.body.message)).toMatch(message);
    expect((await post(service, '/json', login(user))).body).toMatchObject({ statuses: [{ limitRemaining: 3 }] });
  });

  it('refuses huge bodies (413), unknown paths (404) and wrong methods (405)', async () => {
    const huge = await fetch(service.url('/json'), { method: 'POST', body: 'x'.repeat(2 * 1024 * 1024) });
    expect(huge.status).toBe(413);
    expect((await fetch(service.url('/nope'))).status).toBe(404);
    expect((await fetch(service.url('/json'))).status).toBe(405);
  });

  it('cuts off a slow-loris client that never finishes its headers', async () => {
    const closedAfter = await new Promise<number>((resolve) => {
      const started = Date.now();
      const socket = connect(service.httpPort, '127.0.0.1', () => socket.write('POST /json HTTP/1.1\r\nHost: x\r\n'));
      let reply = '';
      socket.on('data', (chunk) => (reply += chunk.toString()));
      socket.on('close', () => {
        expect(reply).toMatch(/^HTTP\/1\.1 408/);
        resolve(Date.now() - started);
      });
      socket.on('error', () => undefined);
    });
    expect(closedAfter).toBeGreaterThanOrEqual(4_000);
    expect(closedAfter).toBeLessThan(8_000);
    expect((await fetch(service.url('/healthz'))).status).toBe(200);
  }, 20_000);
});

describe('tollgate serve, two nodes sharing Redis', () => {
  const redis = useRedisServer();
  let a: ServiceProcess;
  let b: ServiceProcess;

  beforeAll(async () => {
    [a, b] = await Promise.all([
      startServiceProcess(['--config', 'examples/rules', '--redis', redis.url, '--admin-token', TOKEN]),
      startServiceProcess(['--config', 'examples/rules'], { TOLLGATE_REDIS: redis.url, TOLLGATE_ADMIN_TOKEN: TOKEN }),
    ]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('counters are shared: node B sees what node A admitted', async () => {
    for (let i = 0; i < 3; i++) expect((await post(a, '/json', login('carol'))).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await post(b, '/json', login('carol'))).status).toBe(200);
    expect((await post(a, '/json', login('carol'))).status).toBe(429);
    expect((await post(b, '/json', login('carol'))).status).toBe(429);
    expect(await (await fetch(b.url('/readyz'))).json()).toMatchObject({ status: 'ready', store: 'redis', storeReachable: true });
  });

  it('rules replaced on node A are enforced by node B within 1 s', async () => {
    const yaml = 'domain: pushed\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n';
    const put = await fetch(a.admin('/v1/rules'), { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: yaml });
    expect(put.status).toBe(200);
    const pushed = { domain: 'pushed', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] };
    await expect
      .poll(async () => ((await post(b, '/json', { ...pushed, descriptors: [{ entries: [{ key: 'k', value: 'probe' }] }] })).body.statuses as { currentLimit?: unknown }[])[0]!.currentLimit, {
        timeout: 1_000,
        interval: 20,
      })
      .toEqual({ requestsPerUnit: 2, unit: 'MINUTE' });
    expect((await post(a, '/json', pushed)).status).toBe(200);
    expect((await post(b, '/json', pushed)).status).toBe(200);
    expect((await post(b, '/json', pushed)).status).toBe(429);
  });
});

describe('tollgate serve --workers 2 on Redis', () => {
  it('two worker processes share the ports (decision and admin) and the counters, and stop gracefully', async () => {
    const redis = await startRedis();
    try {
      const service = await startServiceProcess(['--config', 'examples/rules', '--redis', redis.url, '--workers', '2']);
      const started = () => service.logs.filter((line) => String(line.msg).startsWith('HTTP listening')).length;
      await expect.poll(started, { timeout: 10_000 }).toBe(2);
      const pids = new Set(service.logs.filter((line) => String(line.msg).startsWith('HTTP listening')).map((line) => line.pid));
      expect(pids.size).toBe(2);
      // Both workers share the admin listener too (node:cluster gives port 0 one port for all).
      const adminPorts = new Set(service.logs.filter((line) => String(line.msg).startsWith('Admin listening')).map((line) => line.port));
      expect([...adminPorts]).toEqual([service.adminPort]);
      expect((await fetch(service.admin('/healthz'))).status).toBe(200);
      const codes: number[] = [];
      for (let i = 0; i < 8; i++) codes.push((await post(service, '/json', login('workers'))).status);
      expect(codes).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      expect(await service.stop()).toBe(0);
      expect(service.logs.filter((line) => line.msg === 'stopped')).toHaveLength(2);
    } finally {
      await redis.stop();
    }
  }, 30_000);
});
