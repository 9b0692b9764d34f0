/**
 * `tollgate overrides get|put|delete` against a real service on loopback: put from a file and from
 * standard input, and get as real processes (`node dist/cli/main.js`, so build first); the
 * exit codes (1 no such override, 2 bad flags or an invalid override with nothing sent or changed,
 * 3 a wrong token) in-process, through the entry point the CLI calls.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAdminCommand } from '../../../src/cli/admin/index.js';
import { inProcessServiceForSuite, type CommandRun as Run } from '../../support/in-process-service.js';

const CLI = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
const TOKEN = 'admin-token-for-the-overrides-cli-test';
const dir = mkdtempSync(join(tmpdir(), 'tollgate-overrides-cli-'));

const suite = inProcessServiceForSuite({ config: 'examples/rules', 'admin-token': TOKEN });

/** The built CLI as a process, with the admin listener's URL and the token unless `env` says otherwise; `input` on its stdin. */
function overrides(args: string[], input?: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [CLI, 'overrides', ...args], { env: { ...process.env, TOLLGATE_ADMIN_URL: suite.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, ...env }, timeout: 15_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? NaN), stdout, stderr });
    });
    child.stdin!.end(input ?? '');
  });
}

/** In-process, as `overrides` but without a process. */
async function overridesHere(args: string[], env: Record<string, string> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runAdminCommand('overrides', args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) }, { TOLLGATE_ADMIN_URL: suite.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, ...env }, () => Promise.resolve(''));
  return { code, stdout, stderr };
}

/** What the decision listener answers for user_id `user` of domain per_user: its limit. */
async function limitOf(user: string): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${suite.service.httpPort!}/v1/check`, { method: 'POST', body: JSON.stringify({ domain: 'per_user', descriptors: [{ user_id: user }] }) });
  const body = (await response.json()) as { statuses: { currentLimit?: { requestsPerUnit: number } }[] };
  return body.statuses[0]!.currentLimit!.requestsPerUnit;
}

describe('tollgate overrides as a process', () => {
  it('put FILE (YAML) and put - (JSON on stdin) take effect; get lists them; delete removes one, --all a domain', async () => {
    const yaml = join(dir, 'acme.yaml');
    writeFileSync(yaml, 'domain: per_user\ndescriptors:\n  - key: user_id\n    value: acme\n    rate_limit: { unit: hour, requests_per_unit: 5000, algorithm: token-bucket, burst: 50 }\nexpires: 24h\n');
    const putFile = await overrides(['put', yaml]);
    expect(putFile).toMatchObject({ code: 0, stderr: '' });
    expect(putFile.stdout).toMatch(/^put per_user\|user_id=acme: 5000\/hour token-bucket, expires \d{4}-\d\d-\d\dT[\d:.]+Z, shadows per_user\.user_id\n$/);
    const json = JSON.stringify([{ domain: 'per_user', descriptors: [{ key: 'user_id', value: 'globex', rate_limit: { unit: 'hour', requests_per_unit: 7, algorithm: 'token-bucket', burst: 7 } }] }]);
    const putStdin = await overrides(['put', '-'], json);
    expect(putStdin).toMatchObject({ code: 0, stdout: 'put per_user|user_id=globex: 7/hour token-bucket, expires never, shadows per_user.user_id\n' });
    expect([await limitOf('acme'), await limitOf('globex'), await limitOf('someone')]).toEqual([5000, 7, 1000]);

    const listed = await overrides(['get', '--domain', 'per_user']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^ID\s+LIMIT\s+EXPIRES\s+SHADOWS\n/);
    expect(listed.stdout).toMatch(/^per_user\|user_id=acme\s+5000\/hour token-bucket\s+\d{4}-\S+Z\s+per_user\.user_id$/m);
    expect(listed.stdout).toMatch(/^per_user\|user_id=globex\s+7\/hour token-bucket\s+never\s+per_user\.user_id$/m);
    // The rest in-process: the same entry point, fewer processes on a busy machine.
    expect((await overridesHere(['get', '--domain', 'hierarchy'])).stdout).toBe('ID  LIMIT  EXPIRES  SHADOWS\n');
    expect(await overridesHere(['delete', '--domain', 'per_user', '--descriptor', 'user_id=acme'])).toMatchObject({ code: 0, stdout: 'deleted per_user|user_id=acme\n' });
    expect(await limitOf('acme')).toBe(1000);
    expect(await overridesHere(['delete', '--domain', 'per_user', '--all'])).toMatchObject({ code: 0, stdout: 'deleted 1 override(s) of domain per_user\n' });
    const after = JSON.parse((await overridesHere(['get', '--json'])).stdout) as { overrides: unknown[] };
    expect(after.overrides).toEqual([]);
  }, 90_000);

  it('--help lists the actions, the flags, each connection flag with its variable and default, and the exit codes', async () => {
    const help = await overrides(['--help']);
    expect(help.code).toBe(0);
    for (const text of ['get [--domain D]', 'put FILE|-', '--descriptor K=V', '--all', 'TOLLGATE_ADMIN_URL', 'TOLLGATE_ADMIN_TOKEN', `http://127.0.0.1:6070`, 'Exit codes: 0 done, 1 delete: no such override']) expect(help.stdout).toContain(text);
  }, 30_000);
});

describe('tollgate overrides: exit codes', () => {
  it('1 deleting an override that is not there; 2 bad flags or arguments (nothing sent); 3 a wrong token', async () => {
    expect(await overridesHere(['delete', '--domain', 'per_user', '--descriptor', 'user_id=nobody'])).toMatchObject({ code: 1, stderr: 'tollgate overrides delete: no override of domain per_user at user_id=nobody; tollgate overrides get lists them\n' });
    expect(await overridesHere(['delete', '--domain', 'per_user'])).toMatchObject({ code: 2, stderr: expect.stringContaining('either --descriptor K=V,... (one override, its entries in order) or --all') });
    expect(await overridesHere(['delete', '--domain', 'per_user', '--all', '--descriptor', 'user_id=a'])).toMatchObject({ code: 2 });
    expect(await overridesHere(['delete', '--descriptor', 'user_id=a'])).toMatchObject({ code: 2, stderr: expect.stringContaining('needs --domain D') });
    expect(await overridesHere(['get', '--all'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--all is not a flag of overrides get') });
    expect(await overridesHere(['put'])).toMatchObject({ code: 2, stderr: expect.stringContaining('put takes one FILE (YAML or JSON) or - for standard input') });
    expect(await overridesHere(['put', join(dir, 'missing.yaml')])).toMatchObject({ code: 2, stderr: expect.stringContaining('cannot be read (ENOENT)') });
    expect(await overridesHere(['list'])).toMatchObject({ code: 2, stderr: expect.stringContaining('overrides takes get, put or delete, got "list"') });
    expect(await overridesHere(['get'], { TOLLGATE_ADMIN_TOKEN: 'not-the-token' })).toMatchObject({ code: 3, stderr: expect.stringContaining('answered 401 to GET /v1/overrides') });
    expect(await overridesHere(['delete', '--domain', 'per_user', '--all'], { TOLLGATE_ADMIN_TOKEN: '' })).toMatchObject({ code: 2, stderr: expect.stringContaining('needs the admin token') });
  }, 30_000);

  it('2 for an invalid override: as file:line:col before sending, or as the service refuses it (nothing changed)', async () => {
    const typo = join(dir, 'typo.yaml');
    writeFileSync(typo, 'domain: per_user\ndescriptors:\n  - key: user_id\n    value: acme\n    rate_limit: { unit: hours, requests_per_unit: 5 }\n');
    const local = await overridesHere(['put', typo]);
    expect(local.code).toBe(2);
    expect(local.stderr).toMatch(new RegExp(`^${typo}:\\d+:\\d+: .*unit.*\\n`));
    expect(local.stderr).toContain('is not a valid override; nothing was sent');
    const nowhere = join(dir, 'nowhere.yaml');
    writeFileSync(nowhere, 'domain: per_user\ndescriptors:\n  - key: team\n    value: x\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n');
    const refused = await overridesHere(['put', nowhere]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/answered 400 to PUT \/v1\/overrides: .*no rule of domain per_user matches the path per_user\|team=x.*; nothing was changed\n$/);
    expect(JSON.parse((await overridesHere(['get', '--json'])).stdout)).toEqual({ overrides: [] });
  }, 30_000);
});
