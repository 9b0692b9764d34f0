/**
 * `GET /v1/usage` on the admin listener over real HTTP (docs/service.md): per descriptor, the rule
 * it matches and the usage of its counter, spending nothing; the admin token; 400 for a bad query,
 * 404 for an unknown domain. And the org > team > user recipe (examples/rules/hierarchy.yaml): a
 * refusal by the team's budget names the team's rule on `/v1/check` and `/json`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';

const TOKEN = 'usage-test-admin-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
let service: RunningService;
const decision = (path: string) => `http://127.0.0.1:${service.httpPort!}${path}`;
const admin = (path: string) => `http://127.0.0.1:${service.adminPort}${path}`;

beforeAll(async () => {
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'admin-token': TOKEN }, {}), undefined, { grpc: false });
}, 20_000);
afterAll(async () => service?.close());

const check = (body: unknown) => fetch(decision('/v1/check'), { method: 'POST', body: JSON.stringify(body) });
const usage = async (query: string, headers: Record<string, string> = auth) => {
  const response = await fetch(admin(`/v1/usage?${query}`), { headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};
/** The rules count in minutes of the service's clock: a test starting 2 s before a minute ends waits for the next one. */
async function clearOfMinuteEnd(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 2_000) await new Promise((resolve) => setTimeout(resolve, left + 10));
}
/** The three levels of one request, in /v1/check's friendly form. */
const levels = (org: string, team: string, user: string): Record<string, string>[] => [{ org }, { org, team }, { org, team, user }];

describe('GET /v1/usage', () => {
  it('answers per descriptor the rule, its counter and the usage over the period, spending nothing', async () => {
    await clearOfMinuteEnd();
    const before = Date.now();
    for (let i = 0; i < 3; i++) expect((await check({ domain: 'hierarchy', descriptors: levels('initech', 'web', '7') })).status).toBe(200);
    const query = 'domain=hierarchy&descriptor=org=initech&descriptor=org=initech,team=web&descriptor=org=initech,team=web,user=7&descriptor=nope=1';
    const first = await usage(query);
    expect(first.status).toBe(200);
    const rows = first.body.usage as Record<string, unknown>[];
    expect(rows.map((row) => [row.descriptor, row.rule, row.name, row.used, row.limit])).toEqual([
      ['org=initech', 'hierarchy.org', 'org_budget', 3, 1000],
      ['org=initech,team=web', 'hierarchy.org.team', 'team_budget', 3, 100],
      ['org=initech,team=web,user=7', 'hierarchy.org.team.user', 'user_budget', 3, 30],
      ['nope=1', null, undefined, undefined, undefined],
    ]);
    // A minute's fixed window holding the requests: [start, start + 1 min).
    const { periodStart, periodEnd } = rows[0] as { periodStart: number; periodEnd: number };
    expect(periodEnd - periodStart).toBe(60_000);
    expect(periodStart % 60_000).toBe(0);
    expect(periodEnd).toBeGreaterThan(before);
    expect(rows[2]!.key).toBe('hierarchy|org=initech|team=web|user=7');
    // Reading spent nothing.
    expect(((await usage(query)).body.usage as { used: number }[]).slice(0, 3).map((row) => row.used)).toEqual([3, 3, 3]);
  });

  it('needs the admin token; 400 for a bad query, 404 for an unknown domain', async () => {
    expect((await usage('domain=hierarchy&descriptor=org=a', {})).status).toBe(401);
    for (const query of ['descriptor=org=a', 'domain=hierarchy', 'domain=hierarchy&descriptor=org', 'domain=hierarchy&descriptor==a', 'domain=hierarchy&descriptor=org=a&window=1m', 'domain=hierarchy&descriptor=org=a,']) {
      const answer = await usage(query);
      expect(answer.status, query).toBe(400);
      expect(answer.body, query).toMatchObject({ error: 'bad_request', message: expect.stringMatching(/domain|descriptor|key=value|parameter/) });
    }
    const unknown = await usage('domain=nowhere&descriptor=org=a');
    expect(unknown).toMatchObject({ status: 404, body: { message: expect.stringContaining('no rules for domain "nowhere"') } });
  });
});

describe('the org > team > user recipe over the service', () => {
  it('a team out of budget while the org and the user have room: /v1/check and /json name the team rule', async () => {
    await clearOfMinuteEnd();
    // The team's 100 in one request of its two upper levels; the org keeps 900.
    expect((await check({ domain: 'hierarchy', descriptors: levels('acme', 'search', 'x').slice(0, 2), hits: 100 })).status).toBe(200);
    const refused = await check({ domain: 'hierarchy', descriptors: levels('acme', 'search', '42') });
    expect(refused.status).toBe(429);
    const body = (await refused.json()) as { statuses: { code: string; rule: string; currentLimit: { name: string }; limitRemaining: number }[] };
    expect(body.statuses.map((s) => [s.code, s.rule, s.currentLimit.name, s.limitRemaining])).toEqual([
      ['OK', 'hierarchy.org', 'org_budget', 900],
      ['OVER_LIMIT', 'hierarchy.org.team', 'team_budget', 0],
      ['OK', 'hierarchy.org.team.user', 'user_budget', 30],
    ]);
    const entries = (pairs: Record<string, string>) => ({ entries: Object.entries(pairs).map(([key, value]) => ({ key, value })) });
    const envoy = await fetch(decision('/json'), { method: 'POST', body: JSON.stringify({ domain: 'hierarchy', descriptors: levels('acme', 'search', '42').map(entries) }) });
    expect(envoy.status).toBe(429);
    const statuses = ((await envoy.json()) as { statuses: { code: string; currentLimit: { name: string } }[] }).statuses;
    expect(statuses.filter((s) => s.code === 'OVER_LIMIT').map((s) => s.currentLimit.name)).toEqual(['team_budget']);
    // The refusals spent nothing anywhere: the usage says so.
    const after = await usage('domain=hierarchy&descriptor=org=acme&descriptor=org=acme,team=search,user=42');
    expect((after.body.usage as { used: number }[]).map((row) => row.used)).toEqual([100, 0]);
  });
});
