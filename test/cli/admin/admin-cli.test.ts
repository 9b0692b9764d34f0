/**
 * `tollgate check`, `tollgate rules ...`, `tollgate keys ...` against a real service on loopback:
 * a few runs as real processes (`node dist/cli/main.js`, so build first), the rest in-process through
 * the same entry point the CLI calls.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdminCommand, type AdminCommand } from '../../../src/cli/admin/index.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { freePort } from '../../support/redis.js';

const CLI = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
const TOKEN = 'admin-token-for-the-cli-test';

let service: RunningService;
let url: string;
/** The admin listener's URL (rules, keys). */
let adminUrl: string;
let dir: string;

beforeAll(async () => {
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'admin-token': TOKEN }, {}));
  url = `http://127.0.0.1:${service.httpPort!}`;
  adminUrl = `http://127.0.0.1:${service.adminPort}`;
  dir = mkdtempSync(join(tmpdir(), 'tollgate-admin-cli-'));
}, 20_000);

afterAll(async () => {
  await service?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** In-process, with the service's URL and token in the environment unless `env` says otherwise. */
async function run(command: AdminCommand, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runAdminCommand(command, args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) }, { TOLLGATE_URL: url, TOLLGATE_ADMIN_URL: adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, ...env });
  return { code, stdout, stderr };
}

/** As a real process: the built CLI, with only the environment given (no token unless given). */
function runProcess(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const inherited = { ...process.env };
  delete inherited.TOLLGATE_ADMIN_TOKEN;
  delete inherited.TOLLGATE_URL;
  delete inherited.TOLLGATE_ADMIN_URL;
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...inherited, ...env }, timeout: 15_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code), stdout, stderr });
    });
  });
}

describe('tollgate check|rules|keys as a process', () => {
  // Each process takes about a second to start on a loaded machine: they run side by side.
  it('check prints a table (exit 0); a wrong token gets the 401 message, an unreachable service a clear one (exit 3); --help (exit 0)', async () => {
    const port = await freePort();
    const [ok, wrongToken, unreachable, help, commands] = await Promise.all([
      runProcess(['check', '--url', url, '--domain', 'per_ip', '--descriptor', 'remote_address=198.51.100.1']),
      runProcess(['keys', 'blocked', '--url', adminUrl], { TOLLGATE_ADMIN_TOKEN: 'not-the-admin-token' }),
      runProcess(['rules', 'get'], { TOLLGATE_ADMIN_URL: `http://127.0.0.1:${port}` }),
      runProcess(['keys', '--help']),
      runProcess(['--help']),
    ]);
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(ok.stdout).toMatch(/^DESCRIPTOR\s+CODE\s+LIMIT\s+REMAINING\s+RESET\n/);
    expect(ok.stdout).toMatch(/remote_address=198\.51\.100\.1\s+OK\s+100\/minute\s+99\s/);
    expect(ok.stdout).toContain('overall: OK');
    expect(wrongToken.code).toBe(3);
    expect(wrongToken.stderr).toContain('answered 401 to GET /v1/keys/blocked: a valid admin token is required');
    expect(wrongToken.stderr).not.toContain('not-the-admin-token');
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toContain(`cannot reach the service at http://127.0.0.1:${port}: ECONNREFUSED`);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: tollgate keys inspect|reset|block|unblock');
    expect(commands.stdout).toMatch(/^ {2}check {9}One decision from a running service/m);
    expect(commands.stdout).toMatch(/^ {2}rules {9}get \[--domain D\] \| push FILE\|DIR \| diff FILE\|DIR/m);
    expect(commands.stdout).toMatch(/^ {2}keys {10}inspect\|reset\|block\|unblock\|blocked/m);
  }, 30_000);
});

describe('the connection flags', () => {
  it('the token is read from --token-file (a trailing newline dropped); --token is refused (exit 2)', async () => {
    const file = join(dir, 'token');
    writeFileSync(file, `${TOKEN}\n`);
    const right = await run('keys', ['blocked', '--token-file', file, '--json'], { TOLLGATE_ADMIN_TOKEN: 'not-the-admin-token' });
    expect(right.code).toBe(0);
    expect(JSON.parse(right.stdout)).toEqual({ blocked: [] });
    const token = await run('keys', ['blocked', '--token', TOKEN]);
    expect(token.code).toBe(2);
    expect(token.stderr).toContain('--token is refused');
    const missing = await run('keys', ['blocked', '--token-file', join(dir, 'no-such-file')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot be read (ENOENT)');
  });

  it('rules and keys read TOLLGATE_ADMIN_URL (the admin listener), never TOLLGATE_URL; check reads TOLLGATE_URL', async () => {
    const env = { TOLLGATE_URL: `http://127.0.0.1:${await freePort()}`, TOLLGATE_ADMIN_URL: adminUrl };
    expect((await run('keys', ['blocked'], env)).code).toBe(0);
    expect((await run('rules', ['get'], env)).code).toBe(0);
    const check = await run('check', ['--domain', 'per_ip', '--descriptor', 'remote_address=198.51.100.3'], env);
    expect(check.code).toBe(3);
    expect(check.stderr).toContain(`cannot reach the service at ${env.TOLLGATE_URL}`);
    // The decision port does not serve the admin API: a 404 that says where to look.
    const decisionPort = await run('rules', ['get'], { TOLLGATE_ADMIN_URL: url });
    expect(decisionPort.code).toBe(3);
    expect(decisionPort.stderr).toContain('answered 404');
    expect(decisionPort.stderr).toContain('the admin listener (--admin-port)');
    const bad = await run('keys', ['blocked'], { TOLLGATE_ADMIN_URL: 'not a url' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('TOLLGATE_ADMIN_URL "not a url" is not a URL');
  });

  it('every command has --help with its exit codes', async () => {
    for (const command of ['check', 'rules', 'keys'] as const) {
      const help = await run(command, ['--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`Usage: tollgate ${command}`);
      expect(help.stdout).toContain('Exit codes');
      expect(help.stdout).toContain('--token-file FILE');
    }
  });
});

describe('tollgate check', () => {
  it('an unknown domain (a typo) is exit 4 naming the known domains, not OK with no limit', async () => {
    const typo = await run('check', ['--domain', 'per_iq', '--descriptor', 'remote_address=198.51.100.3']);
    expect(typo).toEqual({ code: 4, stdout: '', stderr: 'tollgate check: unknown domain per_iq (did you mean per_ip? known: classic, hierarchy, hybrid, per_api_key, per_ip, per_user); nothing is limited there\n' });
    // --json: the service's answer says so too.
    const json = await run('check', ['--domain', 'per_iq', '--descriptor', 'remote_address=198.51.100.3', '--json']);
    expect(json.code).toBe(4);
    expect(JSON.parse(json.stdout)).toMatchObject({ overallCode: 'OK', unknownDomain: true });
    // The admin listener out of reach: still exit 4, saying why the list is missing.
    const unreachable = await run('check', ['--domain', 'per_iq', '--descriptor', 'remote_address=198.51.100.3'], { TOLLGATE_ADMIN_URL: 'http://127.0.0.1:9' });
    expect(unreachable.code).toBe(4);
    expect(unreachable.stderr).toMatch(/^tollgate check: unknown domain per_iq \(the known domains could not be read from the admin listener: cannot reach the service at http:\/\/127\.0\.0\.1:9/);
  });

  it('an unknown flag: one line with the closest flag, then where the help is (exit 2)', async () => {
    expect(await run('check', ['--domian', 'per_ip'])).toEqual({ code: 2, stdout: '', stderr: 'tollgate check: unknown flag --domian (did you mean --domain?)\nsee tollgate check --help\n' });
  });

  it('exit 1 when over the limit; --json is the service\'s answer', async () => {
    const result = await run('check', ['--domain', 'hybrid', '--descriptor', 'user_id=cli-1', '--descriptor', 'remote_address=198.51.100.2', '--hits', '61', '--json']);
    expect(result.code).toBe(1);
    const answer = JSON.parse(result.stdout) as { overallCode: string; statuses: { code: string; limitRemaining: number }[] };
    expect(answer.overallCode).toBe('OVER_LIMIT');
    expect(answer.statuses.map((status) => status.code)).toEqual(['OVER_LIMIT', 'OK']);
  });

  it.each([
    [['--descriptor', 'a=b'], /needs --domain/],
    [['--domain', 'per_ip'], /at least one --descriptor/],
    [['--domain', 'per_ip', '--descriptor', 'remote_address'], /each entry is KEY=VALUE/],
    [['--domain', 'per_ip', '--descriptor', 'a=1,a=2'], /names "a" twice/],
    [['--domain', 'per_ip', '--descriptor', 'a=1', '--hits', 'lots'], /--hits must be a whole number/],
    [['--domain', 'per_ip', '--descriptor', 'a=1', '--timeout', '0'], /--timeout must be a duration from 1 ms to 600000 ms/],
    [['--domain', 'per_ip', '--descriptor', 'a=1', '--timeout', '300'], /--timeout 300 has no unit: write it with one, "300s" for seconds or "300ms" for milliseconds/],
    [['--domain', 'per_ip', '--descriptor', 'a=1', '--url', 'ftp://example.com'], /must be an http/],
    [['--domain', 'per_ip', '--descriptor', 'a=1', '--colour'], /^tollgate check: unknown flag --colour\nsee tollgate check --help\n$/],
    [['extra', '--domain', 'per_ip', '--descriptor', 'a=1'], /takes no arguments/],
  ])('bad flags %j: exit 2 with the reason', async (args, reason) => {
    const result = await run('check', args);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(reason);
    expect(result.stdout).toBe('');
  });

  it('a service that answers an error: its message, exit 3', async () => {
    const tooMany = Array.from({ length: 33 }, (_, i) => `e${i}=1`).join(',');
    const result = await run('check', ['--domain', 'per_ip', '--descriptor', tooMany]);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/answered 400 to POST \/v1\/check: .*32/);
  });

  it('a service that never answers: exit 3 after --timeout', async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const started = Date.now();
      const result = await run('check', ['--domain', 'd', '--descriptor', 'a=1', '--timeout', '300ms'], { TOLLGATE_URL: `http://127.0.0.1:${(silent.address() as { port: number }).port}` });
      expect(result.code).toBe(3);
      expect(result.stderr).toContain('no answer within --timeout 300 ms');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
  it('another server\'s answer: exit 3 saying so, not a crash', async () => {
    const other = createHttpServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end('{"hello":"world"}'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const otherUrl = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
      const env = { TOLLGATE_URL: otherUrl, TOLLGATE_ADMIN_URL: otherUrl };
      for (const [command, args] of [['check', ['--domain', 'd', '--descriptor', 'a=1']], ['rules', ['get']], ['keys', ['blocked']]] as const) {
        const result = await run(command, [...args], env);
        expect(result.code).toBe(3);
        expect(result.stderr).toMatch(/is not Tollgate's \(.* should be .*\); is --url a Tollgate service\?/);
      }
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });
});

describe('tollgate rules', () => {
  it('get: the version, domains and limits in force; --domain one of them (1 when not in force)', async () => {
    const all = await run('rules', ['get', '--json']);
    expect(all.code).toBe(0);
    const answer = JSON.parse(all.stdout) as { version: string; domains: string[]; limits: Record<string, string[]> };
    expect(answer.version).toBe(service.context.holder.current.version);
    expect(answer.domains).toEqual(expect.arrayContaining(['classic', 'hybrid', 'per_ip']));
    const one = await run('rules', ['get', '--domain', 'per_ip']);
    expect(one.stdout).toContain('per_ip.remote_address: unit=MINUTE requests_per_unit=100');
    expect(one.stdout).not.toContain('hybrid');
    const missing = await run('rules', ['get', '--domain', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('domain "nope" is not in force');
  });

  it('diff shows what a push changes (exit 1), push applies it, then diff finds nothing (exit 0)', async () => {
    const rules = join(dir, 'rules');
    rmSync(rules, { recursive: true, force: true });
    mkdirSync(rules);
    writeFileSync(join(rules, 'per-ip.yaml'), readFileSync('examples/rules/per-ip.yaml', 'utf8').replace('requests_per_unit: 100', 'requests_per_unit: 7'));
    // Sent after per-ip.yaml, in one stream: its directive must still be read as a directive.
    writeFileSync(join(rules, 'z-new.yaml'), '%YAML 1.2\n---\ndomain: cli_new\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 3 }\n');
    const before = await run('rules', ['diff', rules]);
    expect(before.code).toBe(1);
    expect(before.stdout).toContain('domain cli_new: new (not in force)\n+ cli_new.k: unit=SECOND requests_per_unit=3');
    expect(before.stdout).toMatch(/domain per_ip: changed\n- per_ip\.remote_address: unit=MINUTE requests_per_unit=100,.*\n\+ per_ip\.remote_address: unit=MINUTE requests_per_unit=7,/);
    const push = await run('rules', ['push', rules]);
    expect(push.stderr).toBe('');
    expect(push.code).toBe(0);
    expect(push.stdout).toMatch(/^pushed per_ip, cli_new: version [0-9a-f]{16}/);
    expect(service.context.holder.current.domainNames()).toContain('cli_new');
    const after = await run('rules', ['diff', rules, '--json']);
    expect(after.code).toBe(0);
    expect(JSON.parse(after.stdout)).toMatchObject({ changed: false, domains: [{ domain: 'cli_new', status: 'unchanged' }, { domain: 'per_ip', status: 'unchanged' }] });
    // Put the example back for the other tests.
    expect((await run('rules', ['push', 'examples/rules/per-ip.yaml'])).code).toBe(0);
  });

  it('push validates first: file:line:col errors, exit 2, nothing sent', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'domain: cli_bad\ndescriptors:\n  - key: k\n    rate_limit: { unit: minutes, requests_per_unit: 3 }\n');
    const version = service.context.holder.current.version;
    const result = await run('rules', ['push', bad], { TOLLGATE_ADMIN_URL: `http://127.0.0.1:${await freePort()}` });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${bad}:4:25: descriptors[0].rate_limit.unit: unit "minutes" is not one of`);
    expect(result.stderr).toContain('nothing was sent');
    expect(service.context.holder.current.version).toBe(version);
  });

  it.each([
    [['push'], /takes one FILE\|DIR/],
    [['push', '/no/such/rules.yaml'], /\/no\/such\/rules\.yaml/],
    [['get', 'extra'], /takes no PATH/],
    [['apply', 'x'], /rules takes get, push or diff/],
    [['push', 'examples/rules', '--domain', 'per_ip'], /--domain is not a flag of rules push/],
  ])('bad use %j: exit 2', async (args, reason) => {
    const result = await run('rules', args);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(reason);
  });

  it('push without a token is refused before sending (exit 2)', async () => {
    const result = await run('rules', ['push', 'examples/rules/per-ip.yaml'], { TOLLGATE_ADMIN_TOKEN: '' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('needs the admin token');
  });
});

describe('tollgate keys', () => {
  const policy = ['--algorithm', 'fixed-window', '--limit', '5', '--window', '1h'];

  it('inspect shows what is left, reset forgets it', async () => {
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${url}/v1/limit`, { method: 'POST', body: JSON.stringify({ key: 'cli:user', policy: { algorithm: 'fixed-window', limit: 5, window: '1h' } }) });
      expect(response.status).toBe(200);
    }
    const inspected = await run('keys', ['inspect', '--key', 'cli:user', ...policy]);
    expect(inspected.code).toBe(0);
    // What one more request would get: 5 - 2 - 1 left.
    expect(inspected.stdout).toMatch(/^KEY\s+ALLOWED\s+LIMIT\s+REMAINING\s+RESET\ncli:user\s+true\s+5\s+2\s/);
    expect((await run('keys', ['reset', '--key', 'cli:user', ...policy])).stdout).toBe('reset cli:user\n');
    const after = JSON.parse((await run('keys', ['inspect', '--key', 'cli:user', ...policy, '--json'])).stdout) as { decision: { remaining: number } };
    expect(after.decision.remaining).toBe(4);
  });

  it('block denies the entry\'s checks, blocked lists it, unblock lifts it (1 when not blocked)', async () => {
    const check = ['--domain', 'per_ip', '--descriptor', 'remote_address=198.51.100.9'];
    const blocked = await run('keys', ['block', '--key', 'remote_address=198.51.100.9', '--for', '10m']);
    expect(blocked.code).toBe(0);
    expect(blocked.stdout).toMatch(/^blocked remote_address=198\.51\.100\.9 in all domains for 10m \(until \d{4}-/);
    const denied = await run('check', check);
    expect(denied.code).toBe(1);
    // Without --json the table says why: the key is blocked, not over a limit.
    expect(denied.stdout).toMatch(/^DESCRIPTOR\s+CODE\s+LIMIT\s+REMAINING\s+RESET\nremote_address=198\.51\.100\.9\s+OVER_LIMIT\s+blocked\s+0\s/);
    expect(JSON.parse((await run('keys', ['blocked', '--json'])).stdout)).toMatchObject({ blocked: [{ key: 'remote_address=198.51.100.9', domain: '*' }] });
    // Without --json, a table.
    expect((await run('keys', ['blocked'])).stdout).toMatch(/^KEY\s+DOMAIN\s+UNTIL\nremote_address=198\.51\.100\.9\s+\*\s+\d{4}-\d\d-\d\dT/);
    expect(await run('keys', ['unblock', '--key', 'remote_address=198.51.100.9'])).toMatchObject({ code: 0, stdout: 'unblocked remote_address=198.51.100.9 in all domains\n' });
    expect((await run('check', check)).code).toBe(0);
    expect(await run('keys', ['unblock', '--key', 'remote_address=198.51.100.9'])).toMatchObject({ code: 1, stdout: 'remote_address=198.51.100.9 was not blocked in all domains\n' });
    expect((await run('keys', ['blocked'])).stdout).toBe('no key is blocked\n');
  });

  it('block --domain D denies the entry in D only; unblock --domain D lifts that block', async () => {
    const inDomain = ['--domain', 'per_ip', '--descriptor', 'remote_address=198.51.100.10'];
    const elsewhere = ['--domain', 'classic', '--descriptor', 'remote_address=198.51.100.10'];
    const blocked = await run('keys', ['block', '--key', 'remote_address=198.51.100.10', '--domain', 'per_ip', '--for', '10m']);
    expect(blocked.stdout).toMatch(/^blocked remote_address=198\.51\.100\.10 in domain per_ip for 10m/);
    expect((await run('check', inDomain)).code).toBe(1);
    expect((await run('check', elsewhere)).code).toBe(0);
    expect(JSON.parse((await run('keys', ['blocked', '--json'])).stdout)).toMatchObject({ blocked: [{ key: 'remote_address=198.51.100.10', domain: 'per_ip' }] });
    // The all-domains block is another block: not there.
    expect((await run('keys', ['unblock', '--key', 'remote_address=198.51.100.10'])).code).toBe(1);
    expect(await run('keys', ['unblock', '--key', 'remote_address=198.51.100.10', '--domain', 'per_ip'])).toMatchObject({ code: 0, stdout: 'unblocked remote_address=198.51.100.10 in domain per_ip\n' });
    expect((await run('check', inDomain)).code).toBe(0);
  });

  it.each([
    [['inspect', ...policy], /needs --key/],
    [['inspect', '--key', 'k'], /needs the policy/],
    [['reset', '--key', 'k', '--algorithm', 'token-buckt', '--limit', '5', '--window', '1s'], /algorithm "token-buckt" is not one of/],
    [['inspect', '--key', 'k', '--algorithm', 'fixed-window', '--limit', 'five', '--window', '1s'], /limit/],
    [['block', '--key', 'k', '--for', '10x'], /--for "10x" is not a duration/],
    [['block', '--key', 'k', '--for', '600'], /--for 600 has no unit: write it with one, "600s" for seconds or "600ms" for milliseconds/],
    [['block', '--key', 'k', '--for', '2w'], /--for must be a duration from 1 ms to 604800000 ms/],
    [['block'], /needs --key/],
    [['purge', '--key', 'k'], /keys takes inspect, reset, block, unblock or blocked/],
    [['blocked', 'now'], /takes flags only/],
    [['unblock', '--key', 'k', '--for', '1h'], /--for is not a flag of keys unblock \(its flags: --key, --domain\)/],
  ])('bad flags %j: exit 2', async (args, reason) => {
    const result = await run('keys', args);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(reason);
  });

  it('an unknown action is named before the missing token', async () => {
    const result = await run('keys', ['purge'], { TOLLGATE_ADMIN_TOKEN: undefined });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('keys takes inspect, reset, block, unblock or blocked, got "purge"');
  });

  it('without a token: refused before sending (exit 2)', async () => {
    const result = await run('keys', ['blocked'], { TOLLGATE_ADMIN_TOKEN: undefined });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('set TOLLGATE_ADMIN_TOKEN or give --token-file FILE');
  });
});
