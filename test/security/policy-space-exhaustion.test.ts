/**
 * Issue 27, item 2: every new (algorithm, window) named at `/v1/limit` took one of the process's
 * 65,536 state spaces for good; after 65,600 such requests every later `PUT /v1/rules` with a new
 * window was a 400 until restart. Windows first named by requests now take spaces from a bounded
 * share of their own (MAX_AD_HOC_STATE_SPACES, 4,096): past it a request's new window is refused,
 * and the configuration keeps the rest, whatever requests send.
 */
import { describe, expect, it } from 'vitest';
import { MAX_AD_HOC_STATE_SPACES } from '../../src/policy.js';
import { serviceForSuite, type ServiceProcess } from '../support/service.js';

const TOKEN = 'policy-space-admin-token-0123456789';
/**
 * Past the requests' share: once it is taken every new window is refused, so no request takes a
 * space beyond it, however many follow (the attack sent 65,600, past the process's 65,536).
 */
const FLOOD = MAX_AD_HOC_STATE_SPACES + 400;
const CONCURRENCY = 64;

async function limit(service: ServiceProcess, key: string, policy: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(service.url('/v1/limit'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key, policy }) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('a flood of distinct windows at POST /v1/limit', () => {
  const service = serviceForSuite(['--config', 'examples/rules', '--admin-token', TOKEN]);

  it('leaves room for the rules: a push with a new window still loads, and decisions stay exact', async () => {
    const statuses = new Map<number, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < FLOOD) {
          // Windows no rule uses: 1,000,001 ms and up.
          const window = 1_000_001 + next++;
          const { status } = await limit(service(), 'flood', { algorithm: 'fixed-window', limit: 5, window });
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      }),
    );
    // The requests' share is taken, then their new windows are refused.
    expect(Object.fromEntries(statuses)).toEqual({ 200: MAX_AD_HOC_STATE_SPACES, 400: FLOOD - MAX_AD_HOC_STATE_SPACES });
    const refused = await limit(service(), 'flood', { algorithm: 'fixed-window', limit: 5, window: 999_999 });
    expect(refused.body).toMatchObject({ code: 'ERR_TOLLGATE_INVALID_POLICY' });
    expect(String(refused.body.message)).toContain(`${MAX_AD_HOC_STATE_SPACES} distinct algorithm and window pairs`);

    // The operator's push with windows never seen loads.
    const rules = ['domain: pushed', 'descriptors:', '  - key: user', '    rate_limit: { unit: minute, unit_multiplier: 7, requests_per_unit: 3 }', ''].join('\n');
    const push = await fetch(service().admin('/v1/rules'), { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: rules });
    expect(push.status, await push.clone().text()).toBe(200);
    const remaining: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(service().url('/v1/check'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ domain: 'pushed', descriptors: [{ user: 'alice' }] }) });
      const body = (await response.json()) as { statuses: { code: string; limitRemaining?: number }[] };
      remaining.push([response.status, body.statuses[0]!.limitRemaining ?? 0]);
    }
    expect(remaining).toEqual([[200, 2], [200, 1], [200, 0], [429, 0]]);

    // A window already in use is still accepted at /v1/limit, and counts exactly.
    const known = [];
    for (let i = 0; i < 3; i++) known.push((await limit(service(), 'known', { algorithm: 'fixed-window', limit: 5, window: 1_000_001 })).body.remaining);
    expect(known).toEqual([4, 3, 2]);
  }, 180_000);
});
