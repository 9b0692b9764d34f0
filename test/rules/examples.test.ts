/** The example rules load, and the classic limits behave as their comments say. */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { loadRules } from '../../src/rules/load.js';

const NOW = 1_700_000_000_000;
const EXAMPLES = new URL('../../examples/rules/', import.meta.url).pathname;

function entries(...pairs: [string, string][]) {
  return [{ entries: pairs.map(([key, value]) => ({ key, value })) }];
}

/** One descriptor per level of examples/rules/hierarchy.yaml: the org, its team, the user. */
function hierarchy(org: string, team: string, user: string) {
  return [...entries(['org', org]), ...entries(['org', org], ['team', team]), ...entries(['org', org], ['team', team], ['user', user])];
}

describe('examples/rules', () => {
  it('loads every example domain', async () => {
    const rules = await loadRules(EXAMPLES);
    expect(rules.domainNames()).toEqual(['classic', 'hierarchy', 'hybrid', 'per_api_key', 'per_ip', 'per_user']);
  });

  it.each([
    ['5 marketing messages a day per user', [['message_type', 'marketing'], ['to_user', '42']], 5, 86_400_000],
    ['5 logins a minute per user', [['action', 'login'], ['user', 'alice']], 5, 60_000],
    ['300 posts per 3 hours per user', [['action', 'post'], ['user', 'alice']], 300, 10_800_000],
    ['10 accounts a day per IP', [['action', 'signup'], ['remote_address', '203.0.113.7']], 10, 86_400_000],
    ['5 reward claims a week per device', [['action', 'claim_reward'], ['device_id', 'd-9f2']], 5, 604_800_000],
  ] as const)('%s', async (_name, pairs, allowed, windowMs) => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: await loadRules(EXAMPLES) });
    const request = { domain: 'classic', descriptors: entries(...(pairs as unknown as [string, string][])), now: NOW };
    for (let i = 0; i < allowed; i++) expect((await limiter.check(request)).overallCode, `request ${i + 1}`).toBe('OK');
    expect((await limiter.check(request)).overallCode).toBe('OVER_LIMIT');
    // Another caller is unaffected; the same caller passes again once the window has gone by.
    const other = { ...request, descriptors: entries(...(pairs.slice(0, -1) as unknown as [string, string][]), [pairs.at(-1)![0], 'someone-else']) };
    expect((await limiter.check(other)).overallCode).toBe('OK');
    expect((await limiter.check({ ...request, now: NOW + windowMs + 1 })).overallCode).toBe('OK');
  });

  it('the hybrid setup needs both the user and the IP limit to allow', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: await loadRules(EXAMPLES) });
    const request = {
      domain: 'hybrid',
      descriptors: [...entries(['user_id', '42']), ...entries(['remote_address', '203.0.113.7'])],
      now: NOW,
    };
    for (let i = 0; i < 60; i++) await limiter.check(request);
    const denied = await limiter.check(request);
    expect(denied.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    // The IP limit was not charged for the denied request: its status reports what actually remains.
    expect(denied.statuses[1]!.limitRemaining).toBe(240);
    expect((await limiter.check({ ...request, now: NOW + 60_000 })).statuses[1]!.limitRemaining).toBe(299);
  });

  it('the org > team > user hierarchy: a team out of budget refuses by name, and no level spends', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: await loadRules(EXAMPLES) });
    const levels = (user: string) => ({ domain: 'hierarchy', descriptors: hierarchy('acme', 'search', user), now: NOW });
    // Four users take 25 each: the team's 100 are gone, each user has 5 left, the org 900.
    for (const user of ['1', '2', '3', '4']) for (let i = 0; i < 25; i++) expect((await limiter.check(levels(user))).overallCode).toBe('OK');
    const refused = await limiter.check(levels('5'));
    expect(refused.overallCode).toBe('OVER_LIMIT');
    expect(refused.statuses.map((s) => [s.code, s.currentLimit?.name, s.rule])).toEqual([
      ['OK', 'org_budget', 'hierarchy.org'],
      ['OVER_LIMIT', 'team_budget', 'hierarchy.org.team'],
      ['OK', 'user_budget', 'hierarchy.org.team.user'],
    ]);
    // All-or-nothing: the org and the user report what actually remains, nothing was taken.
    expect(refused.statuses.map((s) => s.limitRemaining)).toEqual([900, 0, 30]);
    // Another team of the same org still passes; the org counted its requests, the refused one not.
    const other = await limiter.check({ domain: 'hierarchy', descriptors: hierarchy('acme', 'ads', '5'), now: NOW });
    expect(other.statuses.map((s) => s.limitRemaining)).toEqual([899, 99, 29]);
  });

  it('an unlimited API key is never limited, others get their plan', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: await loadRules(EXAMPLES) });
    const internal = { domain: 'per_api_key', descriptors: entries(['plan', 'free'], ['api_key', 'k_internal']), now: NOW };
    for (let i = 0; i < 50; i++) expect((await limiter.check(internal)).overallCode).toBe('OK');
    const free = { domain: 'per_api_key', descriptors: entries(['plan', 'free'], ['api_key', 'k_1']), now: NOW };
    for (let i = 0; i < 10; i++) await limiter.check(free);
    expect((await limiter.check(free)).overallCode).toBe('OVER_LIMIT');
  });
});

describe('a rules directory without rules files', () => {
  it('is refused rather than loaded as "no limits"', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-empty-'));
    try {
      await expect(loadRules(dir)).rejects.toThrow(/no rules files here/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
