/**
 * The gateway configuration: every invalid fixture refused by the real `tollgate gateway` process
 * with exit code 2 and each problem as `file:line:col: path: message` (one fixture, one or several
 * exact lines); bad flags refused the same way; and, in a running gateway, a changed configuration
 * file (routes) and a changed rules file (limits) both applied without a restart, a broken
 * configuration keeping the last good one.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfigError } from '../../src/errors.js';
import { loadGatewayConfig } from '../../src/gateway/config/read.js';
import { resolveGatewayOptions } from '../../src/gateway/options.js';
import { pino } from 'pino';
import { startGateway } from '../../src/gateway/server.js';
import { capturedLogger } from '../support/logs.js';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';
import { PROCESS_START_MS } from '../support/service.js';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;
const INVALID = new URL('fixtures/invalid/', import.meta.url).pathname;

/** Runs `tollgate gateway ...args` in the fixtures folder; resolves once it exits. */
function gateway(args: string[]): Promise<{ status: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'gateway', ...args], { cwd: INVALID, timeout: 20_000 });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.once('exit', (status) => resolve({ status, stderr, stdout }));
  });
}

/** The problems loading `fixture` reports, one line each (the messages the CLI prints). */
function problemsOf(fixture: string): string[] {
  try {
    loadGatewayConfig(fixture);
  } catch (error) {
    if (error instanceof GatewayConfigError) return error.errors.map((problem) => problem.message.replaceAll(INVALID, ''));
    throw error;
  }
  return [];
}

const FIXTURES: Readonly<Record<string, readonly string[]>> = {
  'unknown-upstream.yaml': ['unknown-upstream.yaml:4:15: routes[0].upstream: unknown upstream "mok"; did you mean "mock"? (the upstreams are mock)'],
  'upstream-not-http.yaml': ['upstream-not-http.yaml:1:20: upstreams.mock: "ftp://127.0.0.1:9999": the URL must start with http:// or https://, got ftp://'],
  'upstream-tls.yaml': [
    'upstream-tls.yaml:2:42: upstreams.plain.tls: tls applies to an https:// upstream, and "http://127.0.0.1:9001" is http://: write the URL with https://, or remove tls',
    'upstream-tls.yaml:3:58: upstreams.lost.tls.ca_file: ca_file no-such-ca.crt cannot be read (ENOENT)',
    'upstream-tls.yaml:4:60: upstreams.notpem.tls.ca_file: ca_file upstream-tls.yaml is not a PEM CA certificate: error:0480006C:PEM routines::no start line',
    'upstream-tls.yaml:5:61: upstreams.byip.tls.server_name: server_name must be a DNS name, got the address 10.0.0.7: an address is not sent as SNI; write it in the url, whose address the certificate must then carry',
    'upstream-tls.yaml:6:46: upstreams.misplaced.ca_file: "ca_file" belongs in tls (tls: { ca_file: ./ca.crt })',
    "upstream-tls.yaml:7:47: upstreams.empty.tls: give ca_file (the CA that signed the upstream's certificate) and / or server_name, or remove tls",
    'upstream-tls.yaml:8:10: upstreams.nourl.url: missing url: give the upstream\'s URL, e.g. url: "https://10.0.0.7:8443"',
  ],
  'upstream-max-connections.yaml': [
    'upstream-max-connections.yaml:2:58: upstreams.zero.max_connections: max_connections must be a whole number from 1 to 65535, got 0',
    'upstream-max-connections.yaml:3:60: upstreams.quoted.max_connections: max_connections must be a whole number from 1 to 65535, got "16" (text, not a number: remove the quotes)',
  ],
  'upstream-with-path.yaml': ['upstream-with-path.yaml:1:20: upstreams.mock: "http://127.0.0.1:9999/api": give the origin only (scheme, host and port): request paths are forwarded as they are'],
  'unknown-action.yaml': ['unknown-action.yaml:8:13: routes[0].rate_limits[0].actions[0].request_header: unknown key "request_header"; did you mean "request_headers"?'],
  'unsupported-action.yaml': [
    'unsupported-action.yaml:8:13: routes[0].rate_limits[0].actions[0].metadata: the metadata action reads envoy dynamic metadata, which the gateway does not have; the gateway takes source_cluster, destination_cluster, request_headers, remote_address, masked_remote_address, generic_key, header_value_match',
  ],
  'missing-domain.yaml': ['missing-domain.yaml:3:5: routes[0].domain: missing domain: name the rules domain its descriptors are checked in, e.g. domain: rl (or a top-level domain)'],
  'two-path-matches.yaml': ['two-path-matches.yaml:3:12: routes[0].match: a match takes exactly one of prefix, path, safe_regex; got prefix and path'],
  'bad-regex.yaml': ['bad-regex.yaml:3:35: routes[0].match.safe_regex.regex: "/v[0-9+" is not a valid regular expression: Invalid regular expression: /^(?:/v[0-9+)$/: Unterminated character class'],
  'on-limit-defer.yaml': [
    'on-limit-defer.yaml:6:21: routes[0].defer.queue: queue must be 1-128 letters, digits, "_", "-" or ":" (no "."), got "orders.v2"',
    'on-limit-defer.yaml:6:42: routes[0].defer.max_body: max_body must be a size from 0 to 67108864 bytes, like 1048576, 64KiB or 1MiB, got "2GB"',
  ],
  'shape-without-max-delay.yaml': ['shape-without-max-delay.yaml:3:5: routes[0].shaping: missing shaping: on_limit: shape holds requests up to a longest wait: give shaping: { max_delay: 2s }'],
  'bad-timeout.yaml': ['bad-timeout.yaml:5:14: routes[0].timeout: timeout "15 seconds" is not a duration: write a whole number and one unit of ms, s, m, h, d or w (e.g. "1m")'],
  // A duration is written with its unit: a bare number is refused, wherever a duration goes.
  'timeout-without-unit.yaml': ['timeout-without-unit.yaml:5:14: routes[0].timeout: timeout 15 has no unit: write it with one, "15s" for seconds or "15ms" for milliseconds'],
  'defaults-without-unit.yaml': [
    'defaults-without-unit.yaml:2:10: timeout: timeout 30 has no unit: write it with one, "30s" for seconds or "30ms" for milliseconds',
    'defaults-without-unit.yaml:3:18: connect_timeout: connect_timeout 2000 has no unit: write it with one, "2000s" for seconds or "2000ms" for milliseconds',
  ],
  'max-delay-without-unit.yaml': ['max-delay-without-unit.yaml:6:27: routes[0].shaping.max_delay: max_delay 150 has no unit: write it with one, "150s" for seconds or "150ms" for milliseconds'],
  'defer-duration-without-unit.yaml': ['defer-duration-without-unit.yaml:6:26: routes[0].defer.result_ttl: result_ttl 3600 has no unit: write it with one, "3600s" for seconds or "3600ms" for milliseconds'],
  'hits-addend-negative.yaml': ['hits-addend-negative.yaml:7:32: routes[0].rate_limits[0].hits_addend.number: number must be a whole number from 0 to 1000000, got -1'],
  'too-many-actions.yaml': ["too-many-actions.yaml:7:18: routes[0].rate_limits[0].actions: a rate limit has at most 32 actions (one descriptor's entries), got 33"],
  'client-networks.yaml': [
    'client-networks.yaml:2:14: ipv6_subnet: ipv6_subnet must be a whole number from 32 to 64, got 128',
    'client-networks.yaml:8:66: routes[0].rate_limits[0].actions[0].masked_remote_address.v4_prefix_mask_len: v4_prefix_mask_len must be a whole number from 0 to 32, got 33',
  ],
  'path-settings.yaml': [
    'path-settings.yaml:2:35: path_with_escaped_slashes_action: path_with_escaped_slashes_action "decode" is not one of keep_unchanged, reject_request, unescape_and_redirect, unescape_and_forward',
    'path-settings.yaml:3:16: merge_slashes: merge_slashes must be true or false, got "yes"',
    'path-settings.yaml:5:46: routes[0].match.case_sensitive: case_sensitive must be true or false, got "sometimes"',
  ],
  'yaml-syntax.yaml': ['yaml-syntax.yaml:5:1: YAML error: sequence item without - indicator'],
  'several-errors.yaml': [
    'several-errors.yaml:1:9: listen: listen must be a port (8888) or host:port ("127.0.0.1:8888"), got "eighty"',
    'several-errors.yaml:4:22: routes[0].match.prefix: prefix must start with /, got "api"',
    'several-errors.yaml:6:5: routes[0].methods: "methods" belongs in match (match: { prefix: /api, methods: ... })',
    'several-errors.yaml:8:15: routes[0].on_limit: on_limit: reject refuses at once, so shaping has no effect: remove shaping, or write on_limit: shape',
  ],
};

describe('tollgate gateway --config: invalid configurations', () => {
  it.each(Object.entries(FIXTURES))('%s: every problem at file:line:col', (fixture, lines) => {
    expect(problemsOf(join(INVALID, fixture))).toEqual(lines);
  });

  it('refuses a missing --config, an unreadable file and a bad setting', () => {
    const minimal = join(INVALID, '..', 'minimal.yaml');
    expect(() => resolveGatewayOptions({}, {})).toThrow('gateway needs --config FILE (or TOLLGATE_GATEWAY_CONFIG)');
    expect(() => resolveGatewayOptions({ config: 'no-such-file.yaml' }, {})).toThrow('no-such-file.yaml: the gateway configuration cannot be read');
    expect(() => resolveGatewayOptions({ config: minimal, 'failure-mode': 'sideways' }, {})).toThrow('--failure-mode (or TOLLGATE_FAILURE_MODE) must be local');
    expect(() => resolveGatewayOptions({ config: minimal }, { TOLLGATE_ADMIN_PORT: '99999' })).toThrow('--admin-port (or TOLLGATE_ADMIN_PORT) must be a port');
  });

  it('the real command prints each problem on its own line and exits 2, as it does for a bad flag', async () => {
    const minimal = join(INVALID, '..', 'minimal.yaml');
    const [several, unknown, help] = await Promise.all([
      gateway(['--config', 'several-errors.yaml']),
      gateway(['--config', minimal, '--no-such-flag']),
      gateway(['--help']),
    ]);
    expect(several.stderr.trimEnd().split('\n')).toEqual(FIXTURES['several-errors.yaml']);
    expect(several.status).toBe(2);
    expect(unknown).toMatchObject({ status: 2, stderr: 'tollgate gateway: unknown flag --no-such-flag\nsee tollgate gateway --help\n' });
    expect(help).toMatchObject({ status: 0, stdout: expect.stringMatching(/^Usage: tollgate gateway --config FILE \[flags\]\n[^]*\n {2}--rules FILE\|DIR +the rules/) });
  });
});

describe('a gateway without rules', () => {
  it('says how to give them in the gateway\'s own terms (rules: in its file, --rules), not serve\'s --config', async () => {
    const upstream = await startUpstream();
    const { logger, logs } = capturedLogger('warn');
    const running = await startTestGateway(`listen: 0\nupstreams: { app: "${upstream.url}" }\ndomain: live\nroutes:\n  - match: { prefix: / }\n    upstream: app\n`, undefined, { logger });
    try {
      const warning = logs.map((line) => String(line.msg)).find((msg) => msg.includes('no rules are loaded'));
      expect(warning).toMatch(/^no rules given \(no rules: in .*gateway\.yaml, no --rules, no TOLLGATE_CONFIG\): .*; add rules: FILE\|DIR to .*gateway\.yaml or give --rules FILE\|DIR/);
      expect(warning).not.toMatch(/--config/);
    } finally {
      await running.close();
      await upstream.close();
    }
  });
});

describe('a running gateway follows its files', () => {
  let upstream: Upstream;
  let running: TestGateway;
  const config = (prefix: string) => `listen: 0\nupstreams: { app: "${upstream.url}" }\ndomain: live\nroutes:\n  - match: { prefix: ${prefix} }\n    upstream: app\n    rate_limits: [{ actions: [{ generic_key: { descriptor_value: all } }] }]\n`;
  const rules = (limit: number) => `domain: live\ndescriptors:\n  - { key: generic_key, value: all, rate_limit: { unit: hour, requests_per_unit: ${limit} } }\n`;

  beforeAll(async () => {
    upstream = await startUpstream();
    running = await startTestGateway(config('/one'), rules(0));
  });
  afterAll(async () => {
    await running?.close();
    await upstream?.close();
  });

  async function until(check: () => Promise<boolean>, what: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  it('applies a changed rules file: the limit of 0 becomes 100', async () => {
    expect((await send(running.url('/one'))).status).toBe(429);
    writeFileSync(join(running.dir, 'rules.yaml'), rules(100));
    await until(async () => (await send(running.url('/one'))).status === 200, 'the new limit applies');
  });

  it('applies a changed configuration, and keeps it when the next one is broken', async () => {
    writeFileSync(join(running.dir, 'gateway.yaml'), `rules: ./rules.yaml\n${config('/two')}`);
    await until(async () => (await send(running.url('/two'))).status === 200, 'the new route applies');
    expect((await send(running.url('/one'))).status).toBe(404);
    const routes = running.gateway.state().routes;
    writeFileSync(join(running.dir, 'gateway.yaml'), 'upstreams: { app: "not a url" }\nroutes: []\n');
    // A broken file is refused: give the watcher time to read it, then the routes are the same.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(running.gateway.state().routes).toBe(routes);
    expect((await send(running.url('/two'))).status).toBe(200);
  });
});

// A real process, stopped by its own PID: SIGTERM drains and exits 0.
it('tollgate gateway stops on SIGTERM with exit code 0', async () => {
  const child = spawn(process.execPath, [CLI, 'gateway', '--config', join(INVALID, '..', 'minimal.yaml'), '--port', '0', '--admin-port', '0', '--host', '127.0.0.1', '--drain-delay', '0'], {
    env: { ...process.env, TOLLGATE_LOG_LEVEL: 'info' },
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + PROCESS_START_MS;
  while (!out.includes('gateway listening')) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the gateway did not start: ${out}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});

describe('examples/gateway', () => {
  it('runs as docs/gateway.md says: the 6th login of a minute from one address is refused', async () => {
    const config = new URL('../../examples/gateway/gateway.yaml', import.meta.url).pathname;
    const clock = new TestClock();
    const options = resolveGatewayOptions({ config, port: '0', 'admin-port': '0', host: '127.0.0.1', 'log-level': 'silent' }, {});
    const running = await startGateway(options, pino({ level: 'silent' }), { clock: clock.read });
    try {
      const login = () => send(`http://127.0.0.1:${running.port}/login`, { method: 'POST', body: '{}' });
      // The example's upstream (port 9000) is not running here: admitted logins get 502 (or whatever
      // listens there), the 6th the gateway's own 429.
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push((await login()).status);
      expect(statuses.slice(0, 5)).not.toContain(429);
      expect(statuses[5]).toBe(429);
    } finally {
      await running.close();
    }
  });
});
