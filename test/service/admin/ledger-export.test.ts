/**
 * `GET /v1/usage/export` on the admin listener over real HTTP (docs/service.md): a period's usage
 * ledger streamed as JSON Lines or CSV, the rules' `ledger:` recorded on `/v1/check`; the admin
 * token; 400 for a bad period, format or parameter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { periodName } from '../../../src/algorithms/ledger-periods.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';

const TOKEN = 'ledger-export-test-admin-token-0123';
const auth = { authorization: `Bearer ${TOKEN}` };
let service: RunningService;
const decision = (path: string) => `http://127.0.0.1:${service.httpPort!}${path}`;
const admin = (path: string) => `http://127.0.0.1:${service.adminPort}${path}`;

beforeAll(async () => {
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/billing', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'admin-token': TOKEN }, {}), undefined, { grpc: false });
}, 20_000);
afterAll(async () => service?.close());

const check = (customer: string, requestId?: unknown) => fetch(decision('/v1/check'), { method: 'POST', body: JSON.stringify({ domain: 'billing', descriptors: [{ customer }], ...(requestId === undefined ? {} : { requestId }) }) });
const exported = async (query: string, headers: Record<string, string> = auth) => {
  const response = await fetch(admin(`/v1/usage/export?${query}`), { headers });
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
};

describe('GET /v1/usage/export', () => {
  it('streams the month of the rules’ ledger as JSON Lines and as CSV: admitted and refused per customer', async () => {
    const month = periodName('month', 'UTC', Date.now());
    for (let i = 0; i < 5; i++) await check('acme');
    await check('globex, "inc"');
    const jsonl = await exported(`period=${month}&format=jsonl`);
    expect(jsonl).toMatchObject({ status: 200, type: 'application/x-ndjson' });
    const rows = jsonl.text.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const byKey = new Map(rows.map((row) => [row.key, row]));
    expect(byKey.get('billing|customer=acme')).toMatchObject({ period: month, admitted: 3, refused: 2 });
    expect(byKey.get('billing|customer=globex, "inc"')).toMatchObject({ admitted: 1, refused: 0 });
    const csv = await exported(`period=${month}&format=csv`);
    expect(csv).toMatchObject({ status: 200, type: 'text/csv; charset=utf-8' });
    const lines = csv.text.trimEnd().split('\n');
    expect(lines[0]).toBe('key,period,periodStart,periodEnd,admitted,refused');
    expect(lines).toContain(`billing|customer=acme,${month},${String(byKey.get('billing|customer=acme')!.periodStart)},${String(byKey.get('billing|customer=acme')!.periodEnd)},3,2`);
    // A key with a comma and quotes is one quoted CSV field.
    expect(lines.some((line) => line.startsWith('"billing|customer=globex, ""inc""",'))).toBe(true);
    // The writes are counted in the service's metrics.
    const metrics = await (await fetch(admin('/metrics'), { headers: auth })).text();
    expect(Number(/^tollgate_ledger_writes_total\{result="counted"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(6);
    // A period nobody was billed in is an empty export (CSV: its header alone).
    expect(await exported('period=2001-01&format=csv')).toMatchObject({ status: 200, text: 'key,period,periodStart,periodEnd,admitted,refused\n' });
  });

  it('a /v1/check retried with the same requestId is billed once; a bad requestId is a 400', async () => {
    const month = periodName('month', 'UTC', Date.now());
    for (let i = 0; i < 2; i++) expect((await check('hooli', 'order-17')).status).toBe(200);
    const rows = (await exported(`period=${month}`)).text.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(rows.find((row) => row.key === 'billing|customer=hooli')).toMatchObject({ admitted: 1 });
    const bad = await check('hooli', '');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toMatch(/requestId must be a string of 1 to 200 characters/);
  });

  it('needs the admin token; a bad period, format or parameter is a 400 that says how to write it', async () => {
    expect((await exported('period=2026-11', {})).status).toBe(401);
    expect((await exported('period=2026-11', { authorization: 'Bearer wrong-token-wrong-token-wrong' })).status).toBe(401);
    const bad = async (query: string) => {
      const answer = await exported(query);
      return { status: answer.status, message: (JSON.parse(answer.text) as { message: string }).message };
    };
    expect(await bad('period=2026-13')).toEqual({ status: 400, message: expect.stringMatching(/"2026-13" is not a period; name a period as 2026 \(year\), 2026-Q4 \(quarter\), 2026-11 \(month\)/) });
    expect(await bad('format=csv')).toEqual({ status: 400, message: expect.stringMatching(/give the period to export/) });
    expect(await bad('period=2026-11&format=xml')).toEqual({ status: 400, message: expect.stringMatching(/format "xml" is not one of jsonl, csv/) });
    expect(await bad('period=2026-11&time_zone=Mars/Base')).toEqual({ status: 400, message: expect.stringMatching(/timeZone "Mars\/Base" is not a time zone/) });
    expect(await bad('period=2026-11&from=1')).toEqual({ status: 400, message: expect.stringMatching(/unknown query parameter "from"/) });
  });
});
