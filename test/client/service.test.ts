/**
 * The client against the real decision service (`startService`, in process, the example rules),
 * asking `POST /v1/check` for logins limited to 5 a minute (sliding log): told to back off, it does,
 * and the service then admits it; its retries stay within its budget, counted by the service's own
 * `tollgate_checks_total`. The service and the client share a controlled clock (the client's sleep
 * moves it), so a minute's wait costs no real time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type TollgateClient } from '../../src/client/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { ControlledTime, START } from './support.js';

const time = new ControlledTime();
let service: RunningService;
let base: string;
/** The service's clock: the client's controlled clock, unless a test freezes it. */
let serviceClock: () => number = time.now;

beforeAll(async () => {
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent' }, {}), undefined, { clock: () => serviceClock() });
  base = `http://127.0.0.1:${service.httpPort}`;
}, 20_000);

afterAll(async () => {
  await service.close();
});

/** Checks the service has answered for the classic domain over /v1/check, from its metrics. */
async function checksAnswered(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${service.adminPort}/metrics`)).text();
  let total = 0;
  for (const match of text.matchAll(/^tollgate_checks_total\{([^}]*)\} (\d+)$/gm)) {
    if (match[1]!.includes('domain="classic"') && match[1]!.includes('transport="check"')) total += Number(match[2]);
  }
  return total;
}

function login(client: TollgateClient, user: string): Promise<Response> {
  return client.fetch(`${base}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ domain: 'classic', descriptors: [{ action: 'login', user }] }),
  });
}

describe('against the decision service', () => {
  it('a client told to back off waits at least Retry-After, and its retry is admitted', async () => {
    const retryAfters: number[] = [];
    const client = createClient({
      now: time.now,
      sleep: time.sleep,
      retryMethods: ['POST'], // a refused check changed nothing: safe to send again
      maxDelayMs: 120_000,
      onRetry: ({ rateLimit }) => retryAfters.push(rateLimit.retryAfterMs!),
    });
    for (let i = 0; i < 5; i++) expect((await login(client, 'alice')).status).toBe(200);
    const sixth = await login(client, 'alice');
    expect(sixth.status).toBe(200);
    expect(await sixth.json()).toMatchObject({ overallCode: 'OK' });
    // Refused at START (5 logins in the rolling minute); the sliding log frees a login at START + 60 s.
    expect(retryAfters).toEqual([60_000]);
    expect(time.sleeps.length).toBe(1);
    expect(time.sleeps[0]).toBeGreaterThanOrEqual(60_000);
    expect(time.current - START).toBe(time.sleeps[0]);
  });

  it('its retries stay within its budget, counted by the service', async () => {
    // The service's clock stands still here: a refused login stays refused however long the client waits.
    const frozenAt = time.current;
    serviceClock = () => frozenAt;
    const plain = createClient({ maxAttempts: 1 });
    for (let i = 0; i < 5; i++) expect((await login(plain, 'carol')).status).toBe(200);
    const before = await checksAnswered();
    const client = createClient({ now: time.now, sleep: time.sleep, retryMethods: ['POST'], maxAttempts: 4, maxDelayMs: 3_600_000, retryBudget: { ratio: 0.25, maxTokens: 2 } });
    const calls = 10;
    for (let i = 0; i < calls; i++) expect((await login(client, 'carol')).status).toBe(429);
    const retries = (await checksAnswered()) - before - calls;
    // The first call spends the 2 tokens the budget starts with; the 9 others earn 2.25: 2 retries.
    expect(retries).toBe(4);
    expect(retries).toBeLessThanOrEqual(2 + 0.25 * calls);
    expect(time.sleeps.slice(1).every((ms) => ms >= 60_000)).toBe(true);
  });
});
