/**
 * Guessing the admin or metrics token from one address: every wrong token was compared and
 * answered 401 at once, as fast as the guesser could send them. Now an address gets 5 wrong
 * Bearer tokens free; each further one locks it out for 1 s, doubling up to 5 minutes, during
 * which all its token-guarded requests are answered 429 with Retry-After, the token not compared;
 * each lockout leaves an audit line. A right token forgets the address's failures. The service
 * runs on a controlled clock: no sleeps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIRST_LOCKOUT_MS, FREE_FAILURES } from '../../src/service/admin/backoff.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { capturedLogger } from '../support/logs.js';

const ADMIN_TOKEN = 'guessing-test-admin-token-012345';
const METRICS_TOKEN = 'guessing-test-metrics-token-6789';

describe('guessing the admin token from one address', () => {
  let service: RunningService;
  let now = 1_800_000_000_000;
  const { logger, logs } = capturedLogger();

  beforeAll(async () => {
    const options = resolveServiceOptions({ port: '0', 'admin-port': '0', host: '127.0.0.1', 'admin-token': ADMIN_TOKEN, 'metrics-token': METRICS_TOKEN }, {});
    service = await startService(options, logger, { grpc: false, clock: () => now });
  }, 20_000);
  afterAll(async () => service?.close());

  const ask = async (token: string, path = '/v1/keys/blocked'): Promise<{ status: number; retryAfter: string | null }> => {
    const response = await fetch(`http://127.0.0.1:${service.adminPort}${path}`, { headers: { authorization: `Bearer ${token}` } });
    await response.arrayBuffer();
    return { status: response.status, retryAfter: response.headers.get('retry-after') };
  };
  const lockouts = () => logs.filter((line) => line.action === 'auth.lockout');

  it('answers 5 wrong tokens 401, locks the address out at the 6th, and refuses even the right token while locked', async () => {
    for (let i = 1; i <= FREE_FAILURES + 1; i++) expect((await ask(`wrong-guess-number-${i}-000000`)).status).toBe(401);
    expect(lockouts()).toEqual([expect.objectContaining({ audit: true, remoteAddress: expect.stringMatching(/127\.0\.0\.1$/), failures: 6, lockoutMs: FIRST_LOCKOUT_MS, status: 429 })]);
    // 20 more guesses while locked: none compared, each answered 429 with when to come back.
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(`locked-guess-${i}-0000000000`)));
    expect(answers.every((answer) => answer.status === 429 && answer.retryAfter === '1')).toBe(true);
    expect(await ask(ADMIN_TOKEN)).toEqual({ status: 429, retryAfter: '1' });
    // The observability pages share the lockout: the metrics token is guessed from the same address.
    expect((await ask(METRICS_TOKEN, '/metrics')).status).toBe(429);
    expect(lockouts()).toHaveLength(1);
  });

  it('doubles the lockout with each wrong token after one ends', async () => {
    now += FIRST_LOCKOUT_MS;
    expect((await ask('wrong-after-the-first-lockout')).status).toBe(401);
    expect(lockouts().at(-1)).toMatchObject({ failures: 7, lockoutMs: 2 * FIRST_LOCKOUT_MS });
    now += FIRST_LOCKOUT_MS;
    expect(await ask(ADMIN_TOKEN)).toEqual({ status: 429, retryAfter: '1' });
    now += FIRST_LOCKOUT_MS;
    expect((await ask('wrong-after-the-second-lockout', '/metrics')).status).toBe(401);
    expect(lockouts().at(-1)).toMatchObject({ failures: 8, lockoutMs: 4 * FIRST_LOCKOUT_MS });
  });

  it('forgets the failures after a right token', async () => {
    now += 4 * FIRST_LOCKOUT_MS;
    expect((await ask(ADMIN_TOKEN)).status).toBe(200);
    for (let i = 1; i <= FREE_FAILURES; i++) expect((await ask(`fresh-wrong-guess-${i}-00000`)).status).toBe(401);
    expect((await ask(ADMIN_TOKEN)).status).toBe(200);
    // Requests without a token guess nothing: a browser before its password prompt is not locked out.
    for (let i = 0; i < 2 * FREE_FAILURES; i++) expect((await fetch(`http://127.0.0.1:${service.adminPort}/dashboard`)).status).toBe(401);
    expect((await ask(METRICS_TOKEN, '/metrics')).status).toBe(200);
  });
});
