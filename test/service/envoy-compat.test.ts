/**
 * What envoyproxy/ratelimit's users rely on, through `/json` and gRPC, on the memory store and a
 * real Redis: metadata returned as dynamic metadata, proto3 JSON defaults, per-descriptor limit
 * overrides, unlimited, `hits_addend: 0` (check only) and token quotas, quota mode, statuses, and
 * envoy's settings (merged domains, response headers, /rlconfig, global shadow and quota modes).
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { rateLimitClient, type RateLimitClient, type RateLimitRequestMessage } from '../support/grpc-client.js';
import { useRedisServer } from '../support/redis-topologies.js';

const COMPAT = 'test/service/fixtures/envoy/compat';
const MERGE = 'test/service/fixtures/envoy/merge';

interface Running {
  service: RunningService;
  grpc: RateLimitClient;
  json(body: unknown): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }>;
}

async function start(flags: Record<string, string>): Promise<Running> {
  const service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', 'log-level': 'silent', host: '127.0.0.1', config: COMPAT, ...flags }, {}));
  const grpc = rateLimitClient(service.grpcPort!);
  const json = async (body: unknown) => {
    const response = await fetch(`http://127.0.0.1:${service.httpPort!}/json`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    return { status: response.status, body: (await response.json()) as Record<string, unknown>, headers: response.headers };
  };
  return { service, grpc, json };
}

const entry = (key: string, value: string) => ({ key, value });
const one = (key: string, value: string, extra: Record<string, unknown> = {}) => ({ entries: [entry(key, value)], ...extra });
type Status = Record<string, unknown>;
const statusesOf = (body: Record<string, unknown>) => body.statuses as Status[];

const redis = useRedisServer();

describe.each(['memory', 'redis'] as const)('envoy compatibility on %s', (storeName) => {
  let run: Running;
  beforeAll(async () => {
    run = await start({ 'response-dynamic-metadata': 'true', ...(storeName === 'redis' ? { redis: redis.url } : {}) });
  }, 30_000);
  afterAll(async () => {
    run?.grpc.close();
    await run?.service.close();
  });
  const unique = (name: string) => `${name}-${storeName}-${Math.random().toString(36).slice(2)}`;

  it('dynamic metadata (--response-dynamic-metadata): the request, and the merged metadata of the limits that passed', async () => {
    const route = unique('route');
    const body = { domain: 'compat', descriptors: [one('route', route), one('service', 'two', { hitsAddend: 0 }), one('service', 'nothing')] };
    const json = await run.json(body);
    expect(json.body.dynamicMetadata).toEqual({
      domain: 'compat',
      descriptors: [{ entries: [`route=${route}`] }, { entries: ['service=two'], hitsAddend: 0 }, { entries: ['service=nothing'] }],
      metadata: { plain: 'route', quota: { name: 'two' } },
    });
    const grpc = await run.grpc.shouldRateLimit({ domain: 'compat', descriptors: [{ entries: [entry('route', route)] }] });
    expect(grpc.dynamic_metadata).toMatchObject({
      fields: {
        domain: { stringValue: 'compat' },
        metadata: { structValue: { fields: { plain: { stringValue: 'route' } } } },
      },
    });
  });

  it('proto3 JSON defaults on /json: a descriptor {} has no entries, an entry without value has the value ""', async () => {
    const empty = await run.json({ domain: 'compat', descriptors: [{}] });
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({ overallCode: 'OK', statuses: [{ code: 'OK' }] });
    const keyOnly = await run.json({ domain: 'compat', descriptors: [{ entries: [{ key: 'route' }] }] });
    expect(statusesOf(keyOnly.body)[0]).toMatchObject({ code: 'OK', currentLimit: { requestsPerUnit: 3, unit: 'MINUTE' }, limitRemaining: 2 });
  });

  it('unlimited: limitRemaining 4294967295 and no currentLimit, on /json and gRPC', async () => {
    const json = await run.json({ domain: 'compat', descriptors: [one('internal', 'x')] });
    expect(statusesOf(json.body)[0]).toEqual({ code: 'OK', limitRemaining: 4294967295 });
    const grpc = await run.grpc.shouldRateLimit({ domain: 'compat', descriptors: [one('internal', 'x')] });
    expect(grpc.statuses[0]).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: 4294967295 });
  });

  it('a per-descriptor limit override is the limit, under its own counter, on /json', async () => {
    const user = unique('override');
    const body = { domain: 'compat', descriptors: [one('user', user, { limit: { requestsPerUnit: 1, unit: 'HOUR' } })] };
    const first = await run.json(body);
    expect(statusesOf(first.body)[0]).toMatchObject({ code: 'OK', currentLimit: { requestsPerUnit: 1, unit: 'HOUR' } });
    expect((await run.json(body)).status).toBe(429);
    // The rule's own limit (5 a minute) still has everything.
    const plain = await run.json({ domain: 'compat', descriptors: [one('user', user)] });
    expect(statusesOf(plain.body)[0]).toMatchObject({ code: 'OK', currentLimit: { requestsPerUnit: 5 }, limitRemaining: 4 });
    const bad = await run.json({ domain: 'compat', descriptors: [one('user', user, { limit: { requestsPerUnit: 1, unit: 'FORTNIGHT' } })] });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/descriptors\[0\]\.limit\.unit must be one of SECOND/);
  });

  it('hits_addend 0 checks without counting; an envoy token quota (check on request, debit on stream done) admits 3 of 4, as envoy does', async () => {
    const check = { domain: 'compat', descriptors: [one('service', 'tokens', { hits_addend: 0 })] };
    const debit = { domain: 'compat', descriptors: [one('service', 'tokens', { hits_addend: 1 })] };
    const grpcCheck: RateLimitRequestMessage = { domain: 'compat', descriptors: [{ entries: [entry('service', 'tokens')], hits_addend: { value: 0 } }] };
    const answers: string[] = [];
    for (let request = 1; request <= 4; request++) {
      // The check alternates between gRPC and /json; the debit is what Envoy sends on stream done.
      const code = request % 2 === 1 ? (await run.grpc.shouldRateLimit(grpcCheck)).overall_code : String((await run.json(check)).body.overallCode);
      answers.push(code);
      if (code === 'OK') await run.json(debit);
    }
    expect(answers).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
    // Checking again counts nothing: still over, and the status says 0 remain.
    const again = await run.json(check);
    expect(again.status).toBe(429);
    expect(statusesOf(again.body)[0]).toMatchObject({ code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 2 } });
    expect(statusesOf(again.body)[0]).not.toHaveProperty('limitRemaining');
  });

  it('quota_mode: a request is over only when every quota-mode limit is over; the statuses still say which', async () => {
    const both: RateLimitRequestMessage = { domain: 'compat', descriptors: [{ entries: [entry('service', 'one')] }, { entries: [entry('service', 'two')] }] };
    const first = await run.grpc.shouldRateLimit(both);
    expect(first.overall_code).toBe('OK');
    const second = await run.grpc.shouldRateLimit(both);
    expect(second.overall_code).toBe('OK');
    expect(second.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OVER_LIMIT', 0],
      ['OK', 0],
    ]);
    const third = await run.grpc.shouldRateLimit(both);
    expect(third.overall_code).toBe('OVER_LIMIT');
    expect(third.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT']);
  });

  it('statuses: OVER_LIMIT reports 0 remaining; the other limits of a denied request report what actually remains', async () => {
    const ip = unique('ip');
    const route = unique('route');
    const request = (hits: number) => ({ domain: 'compat', hitsAddend: hits, descriptors: [one('ip', ip), one('route', route)] });
    // 4 hits: the route allows 3 → denied; the ip limit (10) was not charged and still has 10.
    const denied = await run.json(request(4));
    expect(denied.status).toBe(429);
    expect(statusesOf(denied.body)).toMatchObject([
      { code: 'OK', limitRemaining: 10 },
      { code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 3 } },
    ]);
    expect(statusesOf(denied.body)[1]).not.toHaveProperty('limitRemaining');
    const admitted = await run.json(request(2));
    expect(statusesOf(admitted.body)).toMatchObject([{ limitRemaining: 8 }, { limitRemaining: 1 }]);
    // Durations never overshoot the window: at most one unit.
    const seconds = statusesOf(denied.body).map((s) => Number(String(s.durationUntilReset).slice(0, -1)));
    expect(seconds[1]).toBeLessThanOrEqual(60);
    expect(seconds[0]).toBeLessThanOrEqual(3600);
  });

});

describe("envoy's settings", () => {
  it('response headers: off by default; --response-headers envoy adds envoy three, with the names asked for', async () => {
    const plain = await start({});
    const named = await start({ 'response-headers': 'envoy', 'header-limit': 'X-Quota-Limit' });
    try {
      const request = { domain: 'compat', descriptors: [{ entries: [entry('user', 'h')] }] };
      expect((await plain.grpc.shouldRateLimit(request)).response_headers_to_add).toEqual([]);
      expect((await plain.json(request)).body).not.toHaveProperty('responseHeadersToAdd');
      const grpc = await named.grpc.shouldRateLimit(request);
      expect(grpc.response_headers_to_add.map(({ key, value }) => [key, value])).toEqual([
        ['X-Quota-Limit', '5'],
        ['RateLimit-Remaining', '4'],
        ['RateLimit-Reset', expect.stringMatching(/^([1-9]|[1-5]\d|60)$/)],
      ]);
      // No x-ratelimit-reset of our own to clash with Envoy's enable_x_ratelimit_headers.
      expect(grpc.response_headers_to_add.some(({ key }) => key.toLowerCase().startsWith('x-ratelimit'))).toBe(false);
      const json = await named.json(request);
      expect(json.body.responseHeadersToAdd).toEqual([
        { key: 'X-Quota-Limit', value: '5' },
        { key: 'RateLimit-Remaining', value: '3' },
        { key: 'RateLimit-Reset', value: expect.any(String) },
      ]);
      expect(json.headers.get('x-quota-limit')).toBe('5');
    } finally {
      for (const run of [plain, named]) {
        run.grpc.close();
        await run.service.close();
      }
    }
  });

  it('GET /rlconfig dumps the limits in force, one per line, as envoy does', async () => {
    const run = await start({});
    try {
      const text = await (await fetch(`http://127.0.0.1:${run.service.adminPort}/rlconfig`)).text();
      expect(text).toContain('compat.service_tokens: unit=MINUTE requests_per_unit=2, shadow_mode: false, quota_mode: true, algorithm: fixed-window\n');
      expect(text).toContain('compat.shady: unit=MINUTE requests_per_unit=1, shadow_mode: true, quota_mode: false');
      expect(text).toContain('compat.internal: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false, unlimited: true');
    } finally {
      run.grpc.close();
      await run.service.close();
    }
  });

  it('--shadow-mode answers OK overall; --quota-mode makes every limit a quota', async () => {
    const shadow = await start({ 'shadow-mode': 'true' });
    const quota = await start({ 'quota-mode': 'true' });
    try {
      const request = { domain: 'compat', hitsAddend: 6, descriptors: [{ entries: [entry('user', 'big')] }] };
      const shadowed = await shadow.json(request);
      expect(shadowed.status).toBe(200);
      expect(statusesOf(shadowed.body)[0]!.code).toBe('OVER_LIMIT');
      const twoLimits = { domain: 'compat', hitsAddend: 4, descriptors: [{ entries: [entry('user', 'q')] }, { entries: [entry('route', 'q')] }] };
      const quotaAnswer = await quota.json(twoLimits);
      expect(quotaAnswer.status).toBe(200); // the route (3) is over, the user limit (5) is not: not every quota is over
      expect(statusesOf(quotaAnswer.body).map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT']);
    } finally {
      for (const run of [shadow, quota]) {
        run.grpc.close();
        await run.service.close();
      }
    }
  });

  it('--merge-domains: one domain across several files, on serve and validate', async () => {
    const refused = spawnSync(process.execPath, ['dist/cli/main.js', 'validate', MERGE], { encoding: 'utf8' });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/domain "merged" is already defined at .*a\.yaml/);
    const merged = spawnSync(process.execPath, ['dist/cli/main.js', 'validate', '--merge-domains', MERGE], { encoding: 'utf8' });
    expect(merged.stdout).toBe('OK: 1 domain, 2 descriptors\n');
    const byEnv = spawnSync(process.execPath, ['dist/cli/main.js', 'validate', MERGE], { encoding: 'utf8', env: { ...process.env, TOLLGATE_MERGE_DOMAINS: 'true' } });
    expect(byEnv.status).toBe(0);
    await expect(start({ config: MERGE })).rejects.toThrow(/domain "merged" is already defined/);
    const run = await start({ config: MERGE, 'merge-domains': 'true' });
    try {
      const answer = await run.json({ domain: 'merged', descriptors: [{ entries: [entry('a', 'x')] }, { entries: [entry('b', 'x')] }] });
      expect(statusesOf(answer.body).map((s) => (s.currentLimit as { requestsPerUnit: number }).requestsPerUnit)).toEqual([1, 2]);
    } finally {
      run.grpc.close();
      await run.service.close();
    }
  });
});
