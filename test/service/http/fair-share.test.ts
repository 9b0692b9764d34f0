/**
 * Fair shares through `POST /v1/limit` on a real `tollgate serve` process over loopback: the
 * policy's `share` is taken as the library takes it (two tenants of weights 1 and 3 on 40 get 10
 * and 30), the headers say the group's limit and what this tenant may still take, and a bad
 * `share` is a 400 naming the fix.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

async function post(service: ServiceProcess, body: unknown) {
  const response = await fetch(service.url('/v1/limit'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

describe('POST /v1/limit with share', () => {
  let service: ServiceProcess;

  beforeAll(async () => {
    service = await startServiceProcess(['--config', 'examples/rules']);
  }, 20_000);

  afterAll(async () => {
    expect(await service.stop()).toBe(0);
  });

  it('two tenants of weights 1 and 3 on a shared limit of 40, both demanding 100: 10 and 30; the headers say 40 and what this tenant may take', async () => {
    const group = `svc-${Math.random().toString(36).slice(2)}`;
    // A day's window: the 200 requests never straddle its end (but at midnight UTC).
    const policyOf = (weight: number) => ({ algorithm: 'fixed-window', limit: 40, window: '1d', share: { group, weight } });
    const admitted = [0, 0];
    let lastLight: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 100; i++) {
      for (const [index, weight] of [1, 3].entries()) {
        const answer = await post(service, { key: `tenant-${weight}-${group}`, policy: policyOf(weight) });
        expect([200, 429]).toContain(answer.status);
        if (answer.status === 200) admitted[index]! += 1;
        if (weight === 1 && answer.status === 200) lastLight = answer;
      }
    }
    expect(admitted).toEqual([10, 30]);
    expect(lastLight!.body).toMatchObject({ allowed: true, limit: 40, remaining: 0 });
    expect(lastLight!.headers.get('ratelimit-remaining') ?? lastLight!.headers.get('x-ratelimit-remaining')).toBe('0');
  });

  it.each([
    [{ group: 'g', weight: 0 }, /share.weight must be a whole number from 1 to 1000/],
    [{ group: '', weight: 1 }, /share.group must be a non-empty string/],
  ])('a share of %j is a 400 naming the fix', async (share, message) => {
    const answer = await post(service, { key: 'k', policy: { algorithm: 'fixed-window', limit: 40, window: '1m', share } });
    expect(answer.status).toBe(400);
    expect(JSON.stringify(answer.body)).toMatch(message);
  });
});
