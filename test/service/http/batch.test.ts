/**
 * `POST /v1/check/batch` over real HTTP (the CLI in a child process, memory store): many checks in
 * one request, each decided as `/v1/check` decides it, in order; a bad batch is a 400 naming the
 * bad check, and changes no counter. And `/json`'s answer written from the result (check/envoy.ts)
 * is byte for byte what JSON.stringify of envoy's response object gives.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UNIT_NAMES, envoyCheckOf, envoyResponseText, fromEnvoyRequest, toEnvoyResponse } from '../../../src/service/check/envoy.js';
import type { CheckResult } from '../../../src/rules/check.js';
import { serviceForSuite, type ServiceProcess } from '../../support/service.js';

const login = (user: string) => ({ domain: 'classic', descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', value: user }] }] });

const messageOf = (read: () => unknown): string => {
  try {
    read();
    return 'accepted';
  } catch (error) {
    return (error as Error).message;
  }
};

async function postTo(service: ServiceProcess, path: string, body: unknown) {
  const response = await fetch(service.url(path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('POST /v1/check/batch', () => {
  const running = serviceForSuite(['--config', 'examples/rules']);
  const post = (path: string, body: unknown) => postTo(running(), path, body);

  it("decides every check in order, each as /v1/check answers it (either shape), in one 200", async () => {
    const user = `batch-${Date.now()}`;
    const friendly = { domain: 'classic', descriptors: [{ action: 'login', user }] };
    // 5 logins a minute: the batch's 6th check of the same user is refused by the 5 before it.
    const answer = await post('/v1/check/batch', { checks: [login(user), friendly, login(user), friendly, login(user), friendly, { domain: 'no_such_domain', descriptors: [{ a: 'b' }] }] });
    expect(answer.status).toBe(200);
    const results = answer.body.results as Record<string, unknown>[];
    expect(results.map((result) => result.overallCode)).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT', 'OK']);
    expect(results[4]).toMatchObject({ statuses: [{ code: 'OK', limitRemaining: 0, rule: expect.any(String), key: expect.stringContaining(user) }] });
    expect(results[6]).toMatchObject({ unknownDomain: true });
    // The same counter as /v1/check's, and the same body.
    const single = await post('/v1/check', friendly);
    expect(single.status).toBe(429);
    const again = (await post('/v1/check/batch', { checks: [friendly] })).body.results as Record<string, unknown>[];
    expect(Object.keys(again[0]!)).toEqual(Object.keys(single.body));
    expect(again[0]).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', currentLimit: { requestsPerUnit: 5 } }] });
  });

  it('refuses a bad batch with a 400 saying what is wrong, before counting any of its checks', async () => {
    const user = `bad-batch-${Date.now()}`;
    const refusals: [unknown, RegExp][] = [
      [[login(user)], /the body must be \{ checks: \[/],
      [{ checks: [] }, /checks must hold 1 to 1000 checks, got 0/],
      [{ checks: Array.from({ length: 1001 }, () => login(user)) }, /checks must hold 1 to 1000 checks, got 1001; send more in several requests/],
      [{ checks: [login(user)], more: 1 }, /unknown field "more"; the only field is checks/],
      [{ checks: [login(user), login(user), { domain: 'classic', descriptors: 'x' }] }, /^checks\[2\]: descriptors must be an array/],
      [{ checks: [login(user), { domain: '', descriptors: [{ a: 'b' }] }] }, /^checks\[1\]: domain must be a non-empty string/],
    ];
    for (const [body, message] of refusals) {
      const refused = await post('/v1/check/batch', body);
      expect(refused.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(refused.body).toMatchObject({ error: 'bad_request', code: 'ERR_TOLLGATE_INVALID_CHECK', message: expect.stringMatching(message) });
    }
    // Nothing was counted: the user still has all 5 logins.
    const first = await post('/v1/check', login(user));
    expect(first.body).toMatchObject({ overallCode: 'OK', statuses: [{ limitRemaining: 4 }] });
  });
});

describe("/json's answer written from the result", () => {
  const limit = (name?: string) => ({ requestsPerUnit: 100, unit: 'minute' as const, unitMultiplier: 1, ...(name !== undefined ? { name } : {}) });
  const results: CheckResult[] = [
    { overallCode: 'OK', statuses: [{ code: 'OK', currentLimit: limit(), limitRemaining: 99, durationUntilReset: 48_001 }], now: 1 },
    { overallCode: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', currentLimit: limit('a "quoted" name\n'), limitRemaining: 0, durationUntilReset: 0 }, { code: 'OK', limitRemaining: 4294967295, durationUntilReset: 0 }], now: 1 },
    { overallCode: 'OK', statuses: [{ code: 'OK', limitRemaining: 0, durationUntilReset: 0 }, { code: 'OK', currentLimit: limit(), limitRemaining: 3, durationUntilReset: 999, shadowOverLimit: true, rule: 'r', key: 'k' }], now: 1 },
    // A block: the slow path (responseHeadersToAdd carries tollgate-blocked).
    { overallCode: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', limitRemaining: 0, durationUntilReset: 5_000, retryAfter: 5_000, blocked: true, rule: 'blocked' }], now: 1 },
  ];
  const request = fromEnvoyRequest({ domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] });

  it('is byte for byte JSON.stringify(toEnvoyResponse(...)), with and without headers and metadata', () => {
    for (const result of results) {
      for (const options of [{}, { headers: 'full' as const }, { dynamicMetadata: true }]) {
        expect(envoyResponseText(result, request, options)).toBe(JSON.stringify(toEnvoyResponse(result, request, options)));
      }
    }
  });

  it('is byte for byte JSON.stringify(toEnvoyResponse(...)) for random results (units, names, counts, durations)', () => {
    const limitArb = fc.record(
      { requestsPerUnit: fc.integer({ min: 0, max: 4_294_967_295 }), unit: fc.constantFrom(...Object.keys(UNIT_NAMES)), unitMultiplier: fc.integer({ min: 1, max: 100 }), name: fc.string() },
      { requiredKeys: ['requestsPerUnit', 'unit', 'unitMultiplier'] },
    );
    const statusArb = fc.record(
      {
        code: fc.constantFrom('OK', 'OVER_LIMIT'),
        currentLimit: limitArb,
        limitRemaining: fc.integer({ min: 0, max: 4_294_967_295 }),
        durationUntilReset: fc.integer({ min: 0, max: 400 * 86_400_000 }),
        shadowOverLimit: fc.boolean(),
        rule: fc.string(),
      },
      { requiredKeys: ['code', 'limitRemaining', 'durationUntilReset'] },
    );
    fc.assert(
      fc.property(fc.constantFrom('OK', 'OVER_LIMIT'), fc.array(statusArb, { minLength: 1, maxLength: 5 }), (overallCode, statuses) => {
        const result = { overallCode, statuses, now: 1 } as CheckResult;
        expect(envoyResponseText(result, request)).toBe(JSON.stringify(toEnvoyResponse(result, request)));
      }),
      { numRuns: 300 },
    );
  });

  it('takes a plain envoy request as parsed, and anything else as fromEnvoyRequest reads it', () => {
    const plain = { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] };
    expect(envoyCheckOf(plain)).toBe(plain);
    for (const body of [
      { domain: 'd', descriptors: [{ entries: [{ key: 'k' }] }] },
      { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }], hits_addend: '2' }] },
      { domain: 'd', descriptors: [{}], hitsAddend: 3 },
    ]) {
      expect(envoyCheckOf(body)).toEqual(fromEnvoyRequest(body));
    }
    for (const body of [null, [], { domain: 'd', descriptors: [] }, { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v', x: 1 }] }] }, { domain: 1, descriptors: [{}] }]) {
      expect(messageOf(() => fromEnvoyRequest(body))).not.toBe('accepted');
      expect(messageOf(() => envoyCheckOf(body))).toBe(messageOf(() => fromEnvoyRequest(body)));
    }
  });
});
