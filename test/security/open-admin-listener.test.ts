/**
 * The admin listener opened by mistake, and its tokens in plain sight. `--admin-bind 0.0.0.0`
 * without `--metrics-token` served the dashboard, /metrics and /v1/events (callers' addresses and
 * ids) to the network with only an info line; it is now refused unless `--admin-public` says it is
 * meant (and then warned about). `--admin-token` showed in `ps` to every user of the machine; the
 * tokens are now also read from files (`--admin-token-file`, `--metrics-token-file`, a Kubernetes
 * Secret's mount), so the command line holds only a path.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService } from '../../src/service/server.js';
import { capturedLogger } from '../support/logs.js';
import { startServiceProcess } from '../support/service.js';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;
const ADMIN_TOKEN = 'open-admin-test-admin-token-0123';
const METRICS_TOKEN = 'open-admin-test-metrics-token-456';
const dir = mkdtempSync(join(tmpdir(), 'tollgate-admin-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file holding `text` (as an editor or `echo` writes it: with a newline). */
function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`);
  return path;
}

describe('an admin listener bound beyond loopback', () => {
  it('is refused without a metrics token, naming the ways out; loopback, a token or --admin-public start', () => {
    for (const bind of ['0.0.0.0', '::', '10.1.2.3']) {
      expect(() => resolveServiceOptions({ 'admin-bind': bind }, {})).toThrow(InvalidOptionError);
      expect(() => resolveServiceOptions({}, { TOLLGATE_ADMIN_BIND: bind })).toThrow(/set --metrics-token \(or TOLLGATE_METRICS_TOKEN\) or --metrics-token-file .*, or pass --admin-public/);
    }
    for (const bind of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) expect(resolveServiceOptions({ 'admin-bind': bind }, {}).adminPublic).toBe(false);
    expect(resolveServiceOptions({ 'admin-bind': '0.0.0.0', 'metrics-token': METRICS_TOKEN }, {}).metricsToken).toBe(METRICS_TOKEN);
    expect(resolveServiceOptions({ 'admin-bind': '0.0.0.0', 'admin-public': 'true' }, {}).adminPublic).toBe(true);
    expect(resolveServiceOptions({ 'admin-bind': '0.0.0.0' }, { TOLLGATE_ADMIN_PUBLIC: '1' }).adminPublic).toBe(true);
    expect(() => resolveServiceOptions({ 'admin-bind': '0.0.0.0', 'admin-public': 'yes' }, {})).toThrow('--admin-public (or TOLLGATE_ADMIN_PUBLIC) must be true or false, got "yes"');
  });

  it('stops `tollgate serve` with exit 2 and the reason, before listening', () => {
    const run = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--admin-port', '0', '--admin-bind', '0.0.0.0'], { encoding: 'utf8', timeout: 20_000 });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--admin-bind \(or TOLLGATE_ADMIN_BIND\) is 0\.0\.0\.0, which opens the dashboard, \/metrics and \/v1\/events .* without a token/);
  });

  it('with --admin-public, starts and warns that the pages answer anyone', async () => {
    const { logger, logs } = capturedLogger();
    const options = resolveServiceOptions({ port: '0', 'admin-port': '0', host: '127.0.0.1', 'admin-bind': '0.0.0.0', 'admin-public': 'true' }, {});
    const service = await startService(options, logger, { grpc: false });
    try {
      expect(logs).toContainEqual(expect.objectContaining({ level: 40, adminBind: '0.0.0.0', msg: expect.stringMatching(/^--admin-public: the dashboard, \/metrics and \/v1\/events .* answer anyone who reaches 0\.0\.0\.0:\d+, without a token$/) }));
      expect((await fetch(`http://127.0.0.1:${service.adminPort}/metrics`)).status).toBe(200);
    } finally {
      await service.close();
    }
  });
});

describe('tokens read from files', () => {
  it('keep the tokens off the command line (what `ps` shows), and guard as the flags do', async () => {
    const adminFile = file('admin-token', ADMIN_TOKEN);
    const service = await startServiceProcess(['--admin-token-file', adminFile, '--admin-bind', '127.0.0.1'], { TOLLGATE_METRICS_TOKEN_FILE: file('metrics-token', METRICS_TOKEN) });
    try {
      const commandLine = readFileSync(`/proc/${service.child.pid}/cmdline`, 'utf8');
      expect(commandLine).toContain(adminFile);
      expect(commandLine).not.toContain(ADMIN_TOKEN);
      const withToken = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
      expect((await fetch(service.admin('/v1/keys/blocked'), withToken(ADMIN_TOKEN))).status).toBe(200);
      expect((await fetch(service.admin('/metrics'), withToken(METRICS_TOKEN))).status).toBe(200);
      expect((await fetch(service.admin('/metrics'))).status).toBe(401);
    } finally {
      expect(await service.stop()).toBe(0);
    }
  }, 40_000);

  it('are refused, naming the flag, when unreadable, too short, not one token, or given with the flag', () => {
    const refusals: Array<[Record<string, string>, Record<string, string>, RegExp]> = [
      [{ 'admin-token-file': join(dir, 'missing') }, {}, /^--admin-token-file \(or TOLLGATE_ADMIN_TOKEN_FILE\): .*missing cannot be read \(ENOENT\); give a file holding the token$/],
      [{}, { TOLLGATE_METRICS_TOKEN_FILE: file('short', 'short') }, /^--metrics-token-file \(or TOLLGATE_METRICS_TOKEN_FILE\) must be at least 16 characters/],
      [{ 'admin-token-file': file('two', `${ADMIN_TOKEN} ${ADMIN_TOKEN}`) }, {}, /must hold the token alone, on one line, without spaces$/],
      [{ 'admin-token-file': file('admin-again', ADMIN_TOKEN) }, { TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN }, /^give --admin-token \(or TOLLGATE_ADMIN_TOKEN\) or --admin-token-file \(or TOLLGATE_ADMIN_TOKEN_FILE\), not both$/],
    ];
    for (const [flags, env, message] of refusals) expect(() => resolveServiceOptions(flags, env)).toThrow(message);
    expect(resolveServiceOptions({ 'admin-token-file': file('padded', `  ${ADMIN_TOKEN}\r`) }, {}).adminToken).toBe(ADMIN_TOKEN);
  });
});
