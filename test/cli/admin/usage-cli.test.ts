/**
 * `tollgate usage` against a real service on loopback: the table and --help as a real process (`node
 * dist/cli/main.js`, so build first); --json and the exit codes (2 bad flags, 3 a wrong token, 4 an
 * unknown domain) in-process, through the entry point the CLI calls.
 */
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runAdminCommand } from '../../../src/cli/admin/index.js';
import { inProcessServiceForSuite, type CommandRun as Run } from '../../support/in-process-service.js';

const CLI = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
const TOKEN = 'admin-token-for-the-usage-cli-test';

const suite = inProcessServiceForSuite({ config: 'examples/rules', 'admin-token': TOKEN });

/** The built CLI as a process, with the admin listener's URL and the token unless `env` says otherwise. */
function usage(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const inherited = { ...process.env };
  delete inherited.TOLLGATE_URL;
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'usage', ...args], { env: { ...inherited, TOLLGATE_ADMIN_URL: suite.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, ...env }, timeout: 15_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? NaN), stdout, stderr });
    });
  });
}

/** In-process, as `usage` but without a process. */
async function usageHere(args: string[], env: Record<string, string> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runAdminCommand('usage', args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) }, { TOLLGATE_ADMIN_URL: suite.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, ...env });
  return { code, stdout, stderr };
}

describe('tollgate usage as a process', () => {
  it('prints per descriptor the rule, used/limit and the period; --json gives the answer; nothing is spent', async () => {
    const check = { domain: 'hierarchy', descriptors: [{ org: 'globex' }, { org: 'globex', team: 'infra' }] };
    for (let i = 0; i < 2; i++) expect((await fetch(`http://127.0.0.1:${suite.service.httpPort!}/v1/check`, { method: 'POST', body: JSON.stringify(check) })).status).toBe(200);
    const flags = ['--domain', 'hierarchy', '--descriptor', 'org=globex', '--descriptor', 'org=globex,team=infra', '--descriptor', 'who=else'];
    const [text, json] = await Promise.all([usage(flags), usageHere([...flags, '--json'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout).toMatch(/^DESCRIPTOR\s+RULE\s+USED\s+PERIOD\n/);
    expect(text.stdout).toMatch(/^org=globex\s+org_budget \(hierarchy\.org\)\s+[0-9]\/1000\s+\d{4}-\d\d-\d\dT\d\d:\d\d:00Z \.\. \d{4}-\d\d-\d\dT\d\d:\d\d:00Z$/m);
    expect(text.stdout).toMatch(/^org=globex,team=infra\s+team_budget \(hierarchy\.org\.team\)\s+[0-9]\/100\s/m);
    expect(text.stdout).toMatch(/^who=else\s+none\s+-\s+-$/m);
    expect(json.code).toBe(0);
    const answer = JSON.parse(json.stdout) as { domain: string; usage: { descriptor: string; used?: number; periodStart?: number; periodEnd?: number }[] };
    expect(answer.domain).toBe('hierarchy');
    expect(answer.usage.map((row) => row.descriptor)).toEqual(['org=globex', 'org=globex,team=infra', 'who=else']);
    // Two requests in this minute (or none, when the minute turned since): usage itself spent nothing.
    expect([0, 2]).toContain(answer.usage[0]!.used);
    expect(answer.usage[0]!.periodEnd! - answer.usage[0]!.periodStart!).toBe(60_000);
  }, 30_000);

  it('exit codes: 2 bad flags (nothing sent), 3 a wrong token, 4 an unknown domain; --help is 0', async () => {
    const help = await usage(['--help']);
    const noDomain = await usageHere(['--descriptor', 'org=a']);
    const badDescriptor = await usageHere(['--domain', 'hierarchy', '--descriptor', 'org']);
    const unknownFlag = await usageHere(['--domain', 'hierarchy', '--descriptor', 'org=a', '--hits', '2']);
    const wrongToken = await usageHere(['--domain', 'hierarchy', '--descriptor', 'org=a'], { TOLLGATE_ADMIN_TOKEN: 'not-the-token' });
    const unknownDomain = await usageHere(['--domain', 'nowhere', '--descriptor', 'org=a']);
    expect(noDomain).toMatchObject({ code: 2, stderr: expect.stringContaining('usage needs --domain D') });
    expect(badDescriptor).toMatchObject({ code: 2, stderr: expect.stringContaining('each entry is KEY=VALUE') });
    expect(unknownFlag).toMatchObject({ code: 2, stderr: expect.stringContaining('--hits') });
    expect(wrongToken).toMatchObject({ code: 3, stderr: expect.stringContaining('answered 401 to GET /v1/usage') });
    expect(unknownDomain).toMatchObject({ code: 4, stderr: expect.stringContaining('no rules for domain "nowhere"') });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: tollgate usage --domain D --descriptor KEY=VALUE');
    expect(help.stdout).toContain('Exit codes: 0 done, 2 bad flags, 3 service unreachable or answering an error, 4 unknown domain');
  }, 30_000);
});
