/**
 * docs/migrating.md: every code block in the guide is a file of examples/migrating/, included
 * verbatim, and every example runs: the apps as real processes on loopback (against a Redis this
 * file starts on a free port), the envoy config through Tollgate's loader, `tollgate validate` and
 * `tollgate serve` (HTTP /json and gRPC), and the Envoy wiring checked against the service's
 * defaults. Windows are 15 minutes or longer, so no test depends on timing.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { parse as parseYaml } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { rateLimit } from '../../src/http/index.js';
import { loadRules } from '../../src/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { rateLimitClient } from '../support/grpc-client.js';
import { useRedisServer } from '../support/redis-topologies.js';
import { PROCESS_START_MS, serviceForSuite } from '../support/service.js';

const root = new URL('../..', import.meta.url).pathname;
const guide = readFileSync(join(root, 'docs/migrating.md'), 'utf8');
const EXAMPLES = join(root, 'examples/migrating');

/** The guide's code blocks, each with the file its `<!-- example: PATH -->` marker names. */
function exampleBlocks(): { path: string; text: string }[] {
  return [...guide.matchAll(/<!-- example: (\S+) -->\n```\w*\n([^]*?)```\n/g)].map((match) => ({ path: match[1]!, text: match[2]! }));
}

/** The guide's `<!-- output: ... -->` blocks: what a call prints, checked below. */
function outputBlocks(): { call: string; text: string }[] {
  return [...guide.matchAll(/<!-- output: (.+) -->\n```text\n([^]*?)```\n/g)].map((match) => ({ call: match[1]!, text: match[2]! }));
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)]));
}

describe('docs/migrating.md', () => {
  it('marks every code block as an example file, and each block is that file, verbatim', () => {
    const blocks = exampleBlocks();
    const fences = guide.split('\n').filter((line) => line.startsWith('```')).length;
    expect((blocks.length + outputBlocks().length) * 2).toBe(fences);
    for (const block of blocks) expect(block.text, block.path).toBe(readFileSync(join(root, block.path), 'utf8'));
  });

  it("shows rateLimit()'s own words for an express-rate-limit option", () => {
    expect(outputBlocks().map((block) => block.call)).toEqual(['rateLimit({ windowMs: 60000 })']);
    expect(() => rateLimit({ windowMs: 60000 } as never)).toThrow(outputBlocks()[0]!.text.trimEnd());
  });

  it('includes every file of examples/migrating/', () => {
    const included = new Set(exampleBlocks().map((block) => block.path));
    for (const file of filesUnder(EXAMPLES)) expect(included, file).toContain(relative(root, file));
  });

  it('is linked from the README, docs/http.md and docs/service.md', () => {
    for (const page of ['README.md', 'docs/http.md', 'docs/service.md']) {
      expect(readFileSync(join(root, page), 'utf8'), page).toMatch(/\]\((docs\/)?migrating\.md(#[a-z-]+)?\)/);
    }
  });
});

interface Example {
  readonly url: string;
  readonly child: ChildProcessWithoutNullStreams;
}

const redis = useRedisServer();
const running: ChildProcessWithoutNullStreams[] = [];

afterAll(async () => {
  await Promise.all(running.map(stop));
});

/** Runs `examples/migrating/<name>` with node, on a port of its choosing; resolves once it listens. */
async function runExample(name: string): Promise<Example> {
  const child = spawn(process.execPath, [join(EXAMPLES, name)], { cwd: root, env: { ...process.env, PORT: '0', REDIS_URL: redis.url } });
  running.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not listen within ${PROCESS_START_MS} ms: ${stderr}`)), PROCESS_START_MS);
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = /^listening on (\d+)$/.exec(line);
      if (match !== null) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

async function stop(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

async function get(url: string, init?: RequestInit): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(url, init);
  return { status: response.status, headers: response.headers, body: await response.text() };
}

describe('from express-rate-limit', () => {
  it('erl-keep-store.mjs: two processes share one exact count on Redis; express-rate-limit answers the 6th request', async () => {
    const [a, b] = await Promise.all([runExample('erl-keep-store.mjs'), runExample('erl-keep-store.mjs')]);
    const statuses: number[] = [];
    for (const app of [a, b, a, b, a, b]) statuses.push((await get(`${app.url}/`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    const refused = await get(`${a.url}/`);
    expect(refused.status).toBe(429);
    expect(refused.body).toBe('Too many requests, please try again later.');
    expect(refused.headers.get('ratelimit-policy')).toMatch(/q=5; w=900/);
    await Promise.all([stop(a.child), stop(b.child)]);
  });

  it('erl-to-tollgate.mjs: 5 per client, the IETF fields, onLimited answers, /healthz skipped, API keys counted apart', async () => {
    const app = await runExample('erl-to-tollgate.mjs');
    for (let i = 4; i >= 0; i--) {
      const admitted = await get(`${app.url}/`);
      expect([admitted.status, admitted.body]).toEqual([200, 'hello\n']);
      expect(admitted.headers.get('ratelimit-policy')).toMatch(/^"api";q=5;w=900;pk=/);
      expect(admitted.headers.get('ratelimit')).toMatch(new RegExp(`^"api";r=${i};t=\\d+;pk=`));
      expect(admitted.headers.get('x-ratelimit-limit')).toBeNull();
    }
    const refused = await get(`${app.url}/`);
    expect(refused.status).toBe(429);
    const body = JSON.parse(refused.body) as { error: string; retryAfter: number };
    expect(body.error).toBe('slow down');
    expect(Number(refused.headers.get('retry-after'))).toBe(body.retryAfter);
    const health = await get(`${app.url}/healthz`);
    expect([health.status, health.headers.get('ratelimit')]).toEqual([200, null]);
    expect((await get(`${app.url}/`, { headers: { 'x-api-key': 'k_live_1' } })).status).toBe(200);
    await stop(app.child);
  });
});

describe('from rate-limiter-flexible', () => {
  it('rlf-consume.mjs: consume with points, get, penalty, delete', async () => {
    const app = await runExample('rlf-consume.mjs');
    const json = async (path: string, method = 'GET') => {
      const reply = await get(`${app.url}${path}`, { method });
      const fields = JSON.parse(reply.body) as { remainingPoints: number; msBeforeNext: number; consumedPoints: number };
      return { status: reply.status, retryAfter: reply.headers.get('retry-after'), ...fields };
    };
    expect(await json('/search?points=4')).toMatchObject({ status: 200, remainingPoints: 6, consumedPoints: 4, retryAfter: null });
    expect(await json('/search?points=4')).toMatchObject({ status: 200, remainingPoints: 2, consumedPoints: 8 });
    // 4 do not fit in 2: refused, and nothing is spent (rate-limiter-flexible would count them).
    const refused = await json('/search?points=4');
    expect(refused).toMatchObject({ status: 429, remainingPoints: 2, consumedPoints: 8 });
    expect(refused.msBeforeNext).toBeGreaterThan(0);
    expect(Number(refused.retryAfter)).toBe(Math.ceil(refused.msBeforeNext / 1000));
    expect(await json('/quota')).toMatchObject({ status: 200, remainingPoints: 2 });
    expect(await json('/penalty?points=100', 'POST')).toMatchObject({ remainingPoints: 0, consumedPoints: 10 });
    expect((await json('/search')).status).toBe(429);
    expect(await json('/quota', 'DELETE')).toMatchObject({ status: 200, remainingPoints: 10, consumedPoints: 0 });
    expect((await json('/search')).status).toBe(200);
    await stop(app.child);
  });

  it('rlf-block.mjs: the 4th attempt of a minute starts a 15-minute block, and the block holds', async () => {
    const app = await runExample('rlf-block.mjs');
    for (let i = 0; i < 3; i++) expect((await get(`${app.url}/login`, { method: 'POST' })).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const blocked = await get(`${app.url}/login`, { method: 'POST' });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(895);
      expect(Number(blocked.headers.get('retry-after'))).toBeLessThanOrEqual(900);
    }
    await stop(app.child);
  });

  it('rlf-insurance.mjs: decides on Redis, and on the memory store while Redis is down', async () => {
    const app = await runExample('rlf-insurance.mjs');
    // Redis decides once it answers within the limiter's deadline (50 ms): on a busy machine the
    // first calls (a fresh connection, the script's load) may miss it and be decided in memory.
    await expect.poll(async () => {
      const answer = await get(`${app.url}/`);
      return [answer.status, answer.headers.get('x-decided-by')];
    }, { timeout: 10_000, interval: 50 }).toEqual([200, 'redis']);
    await redis.stop();
    try {
      const during = await get(`${app.url}/`);
      expect([during.status, during.headers.get('x-decided-by')]).toEqual([200, 'memory']);
    } finally {
      await redis.restart(); // Redis back for the tests after this one
    }
    await stop(app.child);
  });
});

describe('from envoyproxy/ratelimit', () => {
  const CONFIG = 'examples/migrating/envoy/config';

  it('the envoy config loads with Tollgate\'s loader and passes tollgate validate', async () => {
    const rules = await loadRules(join(root, CONFIG));
    expect(rules.domainNames()).toEqual(['edge']);
    const validate = spawnSync(process.execPath, ['dist/cli/main.js', 'validate', CONFIG], { cwd: root, encoding: 'utf8' });
    expect([validate.status, validate.stdout.trim()]).toEqual([0, 'OK: 1 domain, 7 descriptors']);
  });

  describe('tollgate serve --config examples/migrating/envoy/config', () => {
    const service = serviceForSuite(['--config', CONFIG, '--host', '127.0.0.1']);
    const check = async (...descriptors: Record<string, string>[]) => {
      const body = { domain: 'edge', descriptors: descriptors.map((d) => ({ entries: Object.entries(d).map(([key, value]) => ({ key, value })) })) };
      const response = await fetch(service().url('/json'), { method: 'POST', body: JSON.stringify(body) });
      return (await response.json()) as { overallCode: string; statuses: { code: string; currentLimit?: { requestsPerUnit: number } }[] };
    };

    it('decides as envoy would: logins, replaces, shadow mode, unlimited, a shared wildcard counter', async () => {
      const login = { action: 'login', remote_address: '203.0.113.7' };
      for (let i = 0; i < 3; i++) expect((await check(login)).overallCode).toBe('OK');
      expect((await check(login)).overallCode).toBe('OVER_LIMIT');
      // per-ip (20 an hour) is replaced by the partner quota when both apply.
      const ip = { remote_address: '198.51.100.4' };
      for (let i = 0; i < 20; i++) await check(ip);
      expect((await check(ip)).overallCode).toBe('OVER_LIMIT');
      const partner = await check(ip, { partner: 'acme' });
      expect(partner.overallCode).toBe('OK');
      expect(partner.statuses[1]!.currentLimit!.requestsPerUnit).toBe(1000);
      for (let i = 0; i < 3; i++) expect((await check({ experiment: 'new-search' })).overallCode).toBe('OK');
      const health = await check({ path: '/healthz' });
      expect([health.overallCode, health.statuses[0]!.currentLimit]).toEqual(['OK', undefined]);
      const reports = await check({ path: '/api/reports/daily' });
      const other = await check({ path: '/api/reports/weekly' });
      expect(other.statuses[0]!.currentLimit!.requestsPerUnit).toBe(600);
      expect((other.statuses[0] as { limitRemaining?: number }).limitRemaining).toBe((reports.statuses[0] as { limitRemaining?: number }).limitRemaining! - 1);
    });

    it('answers Envoy\'s gRPC call for the /login route of envoy.yaml', async () => {
      const client = rateLimitClient(service().grpcPort!);
      try {
        const descriptor = { entries: [{ key: 'action', value: 'login' }, { key: 'remote_address', value: '192.0.2.50' }] };
        const answer = await client.shouldRateLimit({ domain: 'edge', descriptors: [descriptor] });
        expect(answer.overall_code).toBe('OK');
        expect(answer.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 3, unit: 'HOUR' });
      } finally {
        client.close();
      }
    });
  });

  it('envoy.yaml points the ratelimit filter (v3) at Tollgate\'s default gRPC port, for the config\'s domain and keys', async () => {
    const envoy = parseYaml(readFileSync(join(EXAMPLES, 'envoy/envoy.yaml'), 'utf8')) as EnvoyBootstrap;
    const manager = envoy.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config;
    const filter = manager.http_filters.find((f) => f.name === 'envoy.filters.http.ratelimit')!.typed_config;
    expect(filter.domain).toBe('edge');
    expect(filter.rate_limit_service.transport_api_version).toBe('V3');
    const cluster = envoy.static_resources.clusters.find((c) => c.name === filter.rate_limit_service.grpc_service.envoy_grpc.cluster_name)!;
    const port = cluster.load_assignment.endpoints[0]!.lb_endpoints[0]!.endpoint.address.socket_address.port_value;
    expect(port).toBe(resolveServiceOptions({}, {}).grpcPort);
    expect(JSON.stringify(cluster)).toContain('http2_protocol_options');
    // Every descriptor key the routes send has a rule in the config.
    const rules = await loadRules(join(root, CONFIG));
    const keys = new Set(rules.domain('edge')!.exact.keys());
    for (const key of JSON.stringify(manager.route_config).match(/"descriptor_key":"(\w+)"/g) ?? []) expect(keys).toContain(key.split('"')[3]);
    expect([...rules.domain('edge')!.keyOnly.keys()]).toContain('remote_address');
  });
});

/** The parts of an Envoy bootstrap the test reads. */
interface EnvoyBootstrap {
  static_resources: {
    listeners: { filter_chains: { filters: { typed_config: { route_config: unknown; http_filters: { name: string; typed_config: RateLimitFilter }[] } }[] }[] }[];
    clusters: {
      name: string;
      load_assignment: { endpoints: { lb_endpoints: { endpoint: { address: { socket_address: { port_value: number } } } }[] }[] };
    }[];
  };
}

interface RateLimitFilter {
  domain: string;
  rate_limit_service: { transport_api_version: string; grpc_service: { envoy_grpc: { cluster_name: string } } };
}
