/**
 * `tollgate usage export` against a real service on loopback (docs/service.md): the period's
 * ledger to stdout or to a file renamed into place once complete; the exit codes (2 bad flags,
 * 3 a wrong token or a period the service refuses), through the entry point the CLI calls; and
 * `tollgate usage` still answering beside it.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { periodName } from '../../../src/algorithms/ledger-periods.js';
import { runAdminCommand } from '../../../src/cli/admin/index.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';

const TOKEN = 'admin-token-for-the-usage-export-cli-test';
let service: RunningService;
let adminUrl: string;

beforeAll(async () => {
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/billing', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'admin-token': TOKEN }, {}), undefined, { grpc: false });
  adminUrl = `http://127.0.0.1:${service.adminPort}`;
}, 20_000);
afterAll(async () => service?.close());

async function usage(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runAdminCommand('usage', args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) }, { TOLLGATE_ADMIN_URL: adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, ...env });
  return { code, stdout, stderr };
}

describe('tollgate usage export', () => {
  it('writes the period’s ledger to stdout (jsonl) or to --output FILE (csv), renamed into place once complete', async () => {
    const month = periodName('month', 'UTC', Date.now());
    for (let i = 0; i < 2; i++) await fetch(`http://127.0.0.1:${service.httpPort!}/v1/check`, { method: 'POST', body: JSON.stringify({ domain: 'billing', descriptors: [{ customer: 'initech' }] }) });
    const jsonl = await usage(['export', '--period', month]);
    expect(jsonl).toMatchObject({ code: 0, stderr: '' });
    expect(jsonl.stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as { key: string })).toContainEqual(expect.objectContaining({ key: 'billing|customer=initech', period: month, admitted: 2, refused: 0 }));
    const file = join(mkdtempSync(join(tmpdir(), 'ledger-')), 'november.csv');
    expect(await usage(['export', '--period', month, '--format', 'csv', '--output', file])).toEqual({ code: 0, stdout: '', stderr: '' });
    const csv = readFileSync(file, 'utf8').split('\n');
    expect(csv[0]).toBe('key,period,periodStart,periodEnd,admitted,refused');
    expect(csv.some((line) => line.startsWith(`billing|customer=initech,${month},`) && line.endsWith(',2,0'))).toBe(true);
    expect(existsSync(`${file}.partial`)).toBe(false);
  });

  it('exits 2 on bad flags and 3 when the service refuses (a wrong token, a period it cannot read), leaving no file', async () => {
    const bad = async (args: string[]) => usage(['export', ...args]);
    expect(await bad([])).toMatchObject({ code: 2, stderr: expect.stringMatching(/usage export needs --period P, one of 2026, 2026-Q4, 2026-11, 2026-W48, 2026-11-28; got none/) });
    expect(await bad(['--period', 'november'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/got "november"/) });
    expect(await bad(['--period', '2026-11', '--format', 'xml'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/--format must be jsonl or csv, got "xml"/) });
    expect(await bad(['--period', '2026-11', '--domain', 'billing'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/--domain is not a flag of usage export/) });
    expect(await bad(['--period', '2026-11', 'now'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/usage export takes flags only/) });
    expect(await usage(['--period', '2026-11'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/--period is not a flag of usage/) });
    const file = join(mkdtempSync(join(tmpdir(), 'ledger-')), 'out.csv');
    expect(await usage(['export', '--period', '2026-11', '--output', file], { TOLLGATE_ADMIN_TOKEN: 'not-the-token-not-the-token' })).toMatchObject({ code: 3, stderr: expect.stringMatching(/answered 401/) });
    // A month 13 passes the flag's shape check only to show the service's own refusal: 2026-13 is not a month.
    expect(await bad(['--period', '2026-13'])).toMatchObject({ code: 3, stderr: expect.stringMatching(/answered 400 .*"2026-13" is not a period/) });
    expect(existsSync(file) || existsSync(`${file}.partial`)).toBe(false);
  });

  it('tollgate usage still reads a descriptor’s usage beside export', async () => {
    expect(await usage(['--domain', 'billing', '--descriptor', 'customer=initech', '--json'])).toMatchObject({ code: 0, stdout: expect.stringContaining('"rule": "billing.customer"') });
  });
});
