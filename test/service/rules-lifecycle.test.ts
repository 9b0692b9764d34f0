/**
 * The rules' life in the real service, over real HTTP and a real Redis the test starts: what
 * PUT /v1/rules answers when Redis holds a broken document, and what GET /v1/rules says of it;
 * what /readyz and /metrics say while a rules file is broken and once it is restored; the log line
 * a deleted rules file leaves.
 */
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { useRedisServer } from '../support/redis-topologies.js';

const TOKEN = 'a-long-enough-admin-token';
const rulesWith = (domain: string, limit: number) => `domain: ${domain}\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: ${limit} }\n`;

/** The service in this process, its JSON log lines collected. */
async function start(flags: Record<string, string>): Promise<{ service: RunningService; logs: Record<string, unknown>[]; url: (path: string) => string }> {
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', 'admin-token': TOKEN, ...flags }, {}), pino({ level: 'info' }, sink));
  return { service, logs, url: (path) => `http://127.0.0.1:${service.adminPort}${path}` }; // the admin listener: rules, metrics, admin API (and health)
}

const put = (url: string, body: string) => fetch(url, { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/yaml' }, body });
const getJson = async (url: string) => (await (await fetch(url)).json()) as Record<string, unknown>;

describe('PUT /v1/rules while Redis holds a broken document', () => {
  const redis = useRedisServer();
  let node: Awaited<ReturnType<typeof start>>;

  beforeAll(async () => {
    node = await start({ redis: redis.url });
  }, 30_000);
  afterAll(async () => {
    await node?.service.close();
  });

  it('applies the push, answers 200 naming the document every node skips, and shows it in GET /v1/rules', async () => {
    const admin = new Redis(redis.url);
    await admin.hset('tollgate:{rules}:domains', 'legacy', 'domain: legacy\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n');
    await admin.set('tollgate:{rules}:version', '7');
    admin.disconnect();

    const response = await put(node.url('/v1/rules'), rulesWith('api', 5));
    const body = (await response.json()) as Record<string, unknown>;
    expect(response.status).toBe(200);
    expect(body).toMatchObject({ domains: ['api'], skipped: [{ domain: 'legacy', error: expect.stringMatching(/^redis:tollgate:\{rules\}:domains#legacy:4:\d+: descriptors\[0\]\.rate_limit\.unit: unit "fortnight"/) }] });
    expect(body.pushed).toBeGreaterThan(7);
    // The push through Redis leaves its one audit line, naming the domains it replaced.
    expect(node.logs.filter((line) => line.audit === true)).toEqual([expect.objectContaining({ action: 'rules.push', domains: ['api'], result: 'ok', status: 200 })]);

    const rules = await getJson(node.url('/v1/rules'));
    expect(rules.domains).toEqual(['api']);
    expect(rules.pushed).toMatchObject({ version: body.pushed, skipped: [{ domain: 'legacy' }], lastError: expect.stringMatching(/#legacy:4:/) });
    expect(node.logs.some((line) => line.level === 50 && /#legacy:4:/.test(String((line.err as { message?: string } | undefined)?.message)))).toBe(true);
  });

  it('refuses a push it cannot apply with a 400 naming file:line:col, and stores nothing', async () => {
    const before = redis.cli('GET', 'tollgate:{rules}:version');
    const response = await put(node.url('/v1/rules'), rulesWith('api', 5).replace('minute', 'fortnight'));
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toMatch(/^PUT \/v1\/rules:4:\d+: descriptors\[0\]\.rate_limit\.unit: unit "fortnight"/);
    expect(redis.cli('GET', 'tollgate:{rules}:version')).toBe(before);
  });
});

describe('rules files under the service', () => {
  let dir: string;
  let node: Awaited<ReturnType<typeof start>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-lifecycle-'));
    writeFileSync(join(dir, 'api.yaml'), rulesWith('api', 5));
    writeFileSync(join(dir, 'other.yaml'), rulesWith('other', 7));
    node = await start({ config: dir });
    await node.service.context.watcher!.reload();
  }, 30_000);
  afterAll(async () => {
    await node?.service.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const failing = async () => {
    const text = await (await fetch(node.url('/metrics'))).text();
    return Number(/^tollgate_rules_reload_failing\{source="watcher"\} (\d+)$/m.exec(text)?.[1]);
  };

  it('a broken file is reported by /readyz and /metrics until it is restored to the content in force', async () => {
    const watcher = node.service.context.watcher!;
    writeFileSync(join(dir, 'api.yaml'), rulesWith('api', 5).replace('minute', 'fortnight'));
    await watcher.reload();
    expect((await getJson(node.url('/readyz'))).rulesError).toMatch(/api\.yaml:4:\d+: .*unit "fortnight"/);
    expect(await failing()).toBe(1);

    writeFileSync(join(dir, 'api.yaml'), rulesWith('api', 5));
    await watcher.reload();
    expect(await getJson(node.url('/readyz'))).not.toHaveProperty('rulesError');
    expect(await failing()).toBe(0);
  });

  it('a deleted rules file removes its domain and logs a warning naming both', async () => {
    unlinkSync(join(dir, 'other.yaml'));
    await node.service.context.watcher!.reload();
    expect((await getJson(node.url('/v1/rules'))).domains).toEqual(['api']);
    const warning = node.logs.find((line) => line.level === 40 && String(line.msg).includes('other.yaml'));
    expect(warning?.msg).toBe(`rules reloaded without some domains, which no longer limit anything unless pushed: ${join(dir, 'other.yaml')} was removed, and with it "other"`);
  });
});
