/**
 * The decision plane and the admin plane (docs/service.md, "Planes") over real HTTP, on a real
 * `tollgate serve` process: the observability and admin endpoints are not served on the decision
 * port (404), are served on the admin listener, need the metrics token when one is set and the admin
 * token for changes; health answers on both; the admin listener is bound to loopback by default;
 * bad plane flags exit 2 with a message naming the flag.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveGatewayOptions } from '../../../src/gateway/options.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { serviceForSuite } from '../../support/service.js';

const CLI = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
const ADMIN_TOKEN = 'planes-admin-token-0123456789';
const METRICS_TOKEN = 'planes-metrics-token-0123456789';

/** The read-only pages that show callers: the metrics token opens them. */
const OBSERVE = ['/metrics', '/dashboard', '/v1/events', '/v1/rules', '/rlconfig'];
/** The admin API: the admin token only. */
const ADMIN: readonly [string, string][] = [['GET', '/v1/keys/blocked'], ['POST', '/v1/keys/block'], ['DELETE', '/v1/keys/block?key=x'], ['PUT', '/v1/rules'], ['GET', '/v1/keys?key=k&algorithm=fixed-window&limit=1&window=1m']];

const CHECK = JSON.stringify({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '203.0.113.9' }] }] });

/** GET `url` and read the status (the body of an event stream is not waited for). */
async function statusOf(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; body: string; challenge: string | null }> {
  const controller = new AbortController();
  const response = await fetch(url, { method, headers, signal: controller.signal });
  const streaming = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
  const body = streaming ? '' : await response.text();
  controller.abort();
  return { status: response.status, body, challenge: response.headers.get('www-authenticate') };
}

const bearer = (token: string, scheme = 'Bearer') => ({ authorization: `${scheme} ${token}` });
const basic = (password: string) => ({ authorization: `Basic ${Buffer.from(`prometheus:${password}`).toString('base64')}` });

describe('tollgate serve with --admin-token and --metrics-token', () => {
  const running = serviceForSuite(['--config', 'examples/rules', '--admin-token', ADMIN_TOKEN, '--metrics-token', METRICS_TOKEN]);

  it('does not serve the observability or admin endpoints on the decision port (404 saying where they are)', async () => {
    const service = running();
    for (const path of OBSERVE) {
      const answer = await statusOf(service.url(path), bearer(ADMIN_TOKEN));
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body), path).toMatchObject({ code: 'ERR_TOLLGATE_NOT_FOUND', message: expect.stringContaining('the admin listener (--admin-port)') });
    }
    for (const [method, path] of ADMIN) expect((await statusOf(service.url(path), bearer(ADMIN_TOKEN), method)).status, `${method} ${path}`).toBe(404);
  });

  it('serves decisions on the decision port only, and health on both', async () => {
    const service = running();
    expect((await fetch(service.url('/json'), { method: 'POST', body: CHECK })).status).toBe(200);
    expect((await fetch(service.admin('/json'), { method: 'POST', body: CHECK })).status).toBe(404);
    expect((await fetch(service.admin('/v1/check'), { method: 'POST', body: '{}' })).status).toBe(404);
    for (const path of ['/healthz', '/readyz']) {
      expect((await statusOf(service.url(path))).status, path).toBe(200);
      expect((await statusOf(service.admin(path))).status, path).toBe(200);
    }
  });

  it('observability pages: 401 without or with a wrong token, 200 with the metrics token (any case of Bearer), the admin token, or as a Basic password', async () => {
    const service = running();
    for (const path of OBSERVE) {
      const missing = await statusOf(service.admin(path));
      expect(missing.status, path).toBe(401);
      expect(missing.challenge, path).toMatch(/^Basic realm="tollgate"/);
      expect(JSON.parse(missing.body), path).toMatchObject({ code: 'ERR_TOLLGATE_UNAUTHORIZED', message: expect.stringContaining('--metrics-token') });
      expect((await statusOf(service.admin(path), bearer('not-the-metrics-token-at-all'))).status, path).toBe(401);
      expect((await statusOf(service.admin(path), basic('wrong'))).status, path).toBe(401);
      expect((await statusOf(service.admin(path), bearer(METRICS_TOKEN))).status, path).toBe(200);
      expect((await statusOf(service.admin(path), bearer(METRICS_TOKEN, 'bearer'))).status, path).toBe(200);
      expect((await statusOf(service.admin(path), bearer(ADMIN_TOKEN))).status, path).toBe(200);
      expect((await statusOf(service.admin(path), basic(METRICS_TOKEN))).status, path).toBe(200);
    }
    // Refusals are audit lines, as failed admin logins are (rate limited per address).
    await expect.poll(() => service.logs.some((line) => line.action === 'auth.failed' && line.target === 'GET /metrics' && line.reason === 'metrics token: no Authorization header')).toBe(true);
  });

  it('admin endpoints: 401 without the admin token and with the metrics token, served with the admin token', async () => {
    const service = running();
    for (const [method, path] of ADMIN) {
      expect((await statusOf(service.admin(path), {}, method)).status, `${method} ${path}`).toBe(401);
      expect((await statusOf(service.admin(path), bearer(METRICS_TOKEN), method)).status, `${method} ${path}`).toBe(401);
    }
    expect((await statusOf(service.admin('/v1/keys/blocked'), bearer(ADMIN_TOKEN, 'bearer'))).status).toBe(200);
  });

  it('binds the admin listener to loopback by default, the decision listener to every address', async () => {
    const service = running();
    expect(service.logs.find((line) => String(line.msg).startsWith('Admin listening'))?.msg).toMatch(/^Admin listening on 127\.0\.0\.1:\d+ /);
    const outside = Object.values(networkInterfaces()).flat().find((address) => address !== undefined && address.family === 'IPv4' && !address.internal);
    // A machine with no address but loopback cannot show the difference; the log line above still does.
    if (outside === undefined) return;
    const reach = (port: number) =>
      new Promise<string>((resolve) => {
        const socket = connect(port, outside.address, () => {
          socket.destroy();
          resolve('connected');
        });
        socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      });
    expect(await reach(service.httpPort)).toBe('connected');
    expect(await reach(service.adminPort)).toBe('ECONNREFUSED');
  });
});

describe('tollgate serve without --metrics-token', () => {
  const running = serviceForSuite(['--config', 'examples/rules']);

  it('serves the observability pages to whoever reaches the admin listener; the admin API stays refused (403, no admin token)', async () => {
    const service = running();
    for (const path of ['/metrics', '/dashboard', '/v1/rules']) expect((await statusOf(service.admin(path))).status, path).toBe(200);
    expect((await statusOf(service.admin('/v1/keys/blocked'))).status).toBe(403);
    expect((await statusOf(service.url('/metrics'))).status).toBe(404);
  });
});

/** Runs `tollgate serve` with `args`; resolves with its exit code and stderr (it must exit by itself). */
function serveExit(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'serve', '--log-level', 'silent', ...args], { env: { ...process.env, ...env }, timeout: 15_000 }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stderr });
    });
  });
}

describe('plane flags are validated', () => {
  it.each([
    [['--admin-port', '70000'], {}, '--admin-port (or TOLLGATE_ADMIN_PORT) must be a port from 0 to 65535, got "70000"'],
    [[], { TOLLGATE_ADMIN_PORT: 'x' }, '--admin-port (or TOLLGATE_ADMIN_PORT) must be a port from 0 to 65535, got "x"'],
    [['--port', '7070', '--admin-port', '7070'], {}, '--admin-port (or TOLLGATE_ADMIN_PORT) is 7070, the same port as --port (or TOLLGATE_PORT)'],
    [['--grpc-port', '7071', '--admin-port', '7071'], {}, 'the same port as --grpc-port (or TOLLGATE_GRPC_PORT)'],
    [['--admin-bind', 'my host'], {}, '--admin-bind (or TOLLGATE_ADMIN_BIND) must be an IP address such as 127.0.0.1'],
    [[], { TOLLGATE_ADMIN_BIND: '300.1.1.1' }, '--admin-bind (or TOLLGATE_ADMIN_BIND) must be an IP address'],
    [['--metrics-token', 'short'], {}, '--metrics-token (or TOLLGATE_METRICS_TOKEN) must be at least 16 characters'],
  ])('serve %j %j exits 2: %s', async (args, env, message) => {
    const { code, stderr } = await serveExit(args, env);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  }, 20_000);

  it('reads every plane setting from flags, TOLLGATE_* variables, the settings file and defaults', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-planes-'));
    try {
      const settings = join(dir, 'settings.yaml');
      writeFileSync(settings, `admin-port: 7443\nadmin-bind: "::1"\nmetrics-token: ${METRICS_TOKEN}\n`);
      expect(resolveServiceOptions({ settings }, {})).toMatchObject({ adminPort: 7443, adminHost: '::1', metricsToken: METRICS_TOKEN });
      expect(resolveServiceOptions({ settings, 'admin-port': '7444' }, { TOLLGATE_ADMIN_BIND: '0.0.0.0' })).toMatchObject({ adminPort: 7444, adminHost: '0.0.0.0' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(resolveServiceOptions({}, {})).toMatchObject({ adminPort: 6070, adminHost: '127.0.0.1' });
    expect(resolveServiceOptions({}, {})).not.toHaveProperty('metricsToken');
    expect(resolveServiceOptions({ 'admin-port': '0', 'admin-bind': '::' }, { TOLLGATE_METRICS_TOKEN: METRICS_TOKEN })).toMatchObject({ adminPort: 0, adminHost: '::', metricsToken: METRICS_TOKEN });
    expect(resolveServiceOptions({ port: '0', 'admin-port': '0', 'grpc-port': '0' }, {})).toMatchObject({ port: 0, adminPort: 0, grpcPort: 0 });
  });

  it('the gateway: its admin port (9901) is bound to loopback by default, and may not be the proxy port', () => {
    const config = 'test/gateway/fixtures/minimal.yaml';
    expect(resolveGatewayOptions({ config }, {}).service).toMatchObject({ adminPort: 9901, adminHost: '127.0.0.1' });
    expect(resolveGatewayOptions({ config, 'admin-bind': '0.0.0.0', 'metrics-token': METRICS_TOKEN }, {}).service).toMatchObject({ adminHost: '0.0.0.0', metricsToken: METRICS_TOKEN });
    expect(() => resolveGatewayOptions({ config, port: '9000', 'admin-port': '9000' }, {})).toThrow('--admin-port (or TOLLGATE_ADMIN_PORT) is 9000, the same port as the proxy');
  });
});
