/**
 * The overrides' admin API over real HTTP on one service (the memory store: the overrides live in
 * the process): put as YAML or JSON, listed with expiry, marked on the rules they shadow, enforced,
 * expired by the service's clock, deleted one by one or a domain at once only when asked to, every
 * change audited; bad input is a 400 naming what to fix, and nothing changes.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';

const TOKEN = 'overrides-admin-token-0123456789';
const RULES = 'test/service/fixtures/overrides-rules.yaml';
const START = Date.UTC(2026, 10, 29, 12, 0, 0);
let now = START;
let service: RunningService;
const audit: Record<string, unknown>[] = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '' && line.includes('"audit":true')) audit.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const flags = { port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', 'drain-delay': '0', 'admin-token': TOKEN, config: RULES };
  service = await startService(resolveServiceOptions(flags, {}), pino({ level: 'info' }, sink), { grpc: false, clock: () => now });
}, 20_000);
afterAll(async () => service?.close());

async function admin(method: string, path: string, body?: string, token = TOKEN): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${service.adminPort}${path}`, { method, headers: { authorization: `Bearer ${token}` }, ...(body !== undefined ? { body } : {}) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The limit a check of `user` meets, over the decision listener. */
async function limitOf(user: string): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${service.httpPort}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: user }] }] }),
  });
  const body = (await response.json()) as { statuses: { currentLimit?: { requestsPerUnit: number } }[] };
  return body.statuses[0]!.currentLimit!.requestsPerUnit;
}

/** The dashboard's first snapshot from GET /v1/events. */
async function firstSnapshot(): Promise<{ rulesInfo: { overrides: unknown } }> {
  const controller = new AbortController();
  const response = await fetch(`http://127.0.0.1:${service.adminPort}/v1/events`, { signal: controller.signal });
  const reader = response.body!.getReader();
  let text = '';
  const snapshot = /^event: snapshot\ndata: (.*)\n/m;
  while (!snapshot.test(text)) text += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
  return JSON.parse(snapshot.exec(text)![1]!) as { rulesInfo: { overrides: unknown } };
}

const YAML_PUT = `domain: api
descriptors:
  - key: user
    value: acme
    rate_limit: { unit: minute, requests_per_unit: 100 }
expires: 1h
---
domain: api
descriptors:
  - key: plan
    value: gold
    descriptors:
      - key: user
        value: acme
        rate_limit: { unit: minute, requests_per_unit: 50 }
`;

describe('PUT, GET and DELETE /v1/overrides', () => {
  it('puts YAML documents, lists them with expiry, enforces them and marks the rules they shadow', async () => {
    const put = await admin('PUT', '/v1/overrides', YAML_PUT);
    expect(put.status).toBe(200);
    expect(put.body.put).toMatchObject([
      { id: 'api|user=acme', shadows: 'api.user', expires: new Date(START + 3_600_000).toISOString() },
      { id: 'api|plan=gold|user=acme', shadows: 'api.plan=gold.user', expires: null },
    ]);
    expect(await limitOf('acme')).toBe(100);
    expect(await limitOf('someone')).toBe(2);
    const rules = await admin('GET', '/v1/rules');
    expect(rules.body.overridden).toEqual([
      { rule: 'api.plan=gold.user', overridden_by: ['api|plan=gold|user=acme'] },
      { rule: 'api.user', overridden_by: ['api|user=acme'] },
    ]);
    const listed = await admin('GET', '/v1/overrides');
    expect((listed.body.overrides as { id: string }[]).map((o) => o.id)).toEqual(['api|plan=gold|user=acme', 'api|user=acme']);
    const snapshot = await firstSnapshot();
    expect(snapshot.rulesInfo.overrides).toEqual({
      total: 2,
      listed: [
        { id: 'api|plan=gold|user=acme', requestsPerUnit: 50, unit: 'minute', shadows: 'api.plan=gold.user', expires: null },
        { id: 'api|user=acme', requestsPerUnit: 100, unit: 'minute', shadows: 'api.user', expires: new Date(START + 3_600_000).toISOString() },
      ],
    });
    expect(await (await fetch(`http://127.0.0.1:${service.adminPort}/dashboard`)).text()).toContain('<ol id="overrides">');
    expect(audit.filter((line) => line.action === 'overrides.put').at(-1)).toMatchObject({ result: 'ok', status: 200, domains: ['api'], overrides: ['api|user=acme', 'api|plan=gold|user=acme'] });
  });

  it('a JSON array replaces overrides of the same path; an expired override stops applying at its expiry', async () => {
    const put = await admin('PUT', '/v1/overrides', JSON.stringify([{ domain: 'api', descriptors: [{ key: 'user', value: 'acme', rate_limit: { unit: 'minute', requests_per_unit: 7 } }], expires: '90s' }]));
    expect(put.status).toBe(200);
    expect(await limitOf('acme')).toBe(7);
    now += 89_999;
    expect(await limitOf('acme')).toBe(7);
    now += 1;
    expect(await limitOf('acme')).toBe(2);
    expect((await admin('GET', '/v1/overrides')).body.overrides).toMatchObject([{ id: 'api|plan=gold|user=acme' }]);
  });

  it('deletes one by path, and a whole domain only with all=true', async () => {
    await admin('PUT', '/v1/overrides', JSON.stringify({ domain: 'api', descriptors: [{ key: 'user', value: 'beta', rate_limit: { unit: 'minute', requests_per_unit: 9 } }] }));
    expect((await admin('DELETE', '/v1/overrides?domain=api')).status).toBe(400);
    expect((await admin('DELETE', '/v1/overrides?domain=api&all=yes')).body.message).toMatch(/all must be true/);
    expect((await admin('DELETE', '/v1/overrides?domain=api&entry=user=nobody')).status).toBe(404);
    const one = await admin('DELETE', '/v1/overrides?domain=api&entry=user=beta');
    expect(one).toMatchObject({ status: 200, body: { deleted: 1 } });
    expect(await limitOf('beta')).toBe(2);
    const all = await admin('DELETE', '/v1/overrides?domain=api&all=true');
    expect(all).toMatchObject({ status: 200, body: { domain: 'api', deleted: 1 } });
    expect((await admin('GET', '/v1/overrides')).body.overrides).toEqual([]);
    expect(audit.filter((line) => line.action === 'overrides.delete').map((line) => line.status)).toEqual([400, 400, 404, 200, 200]);
  });

  it('refuses bad input with a 400 naming what to fix, and changes nothing', async () => {
    const cases: [string, RegExp][] = [
      ['domain: api\ndescriptors: [\n', /not YAML or JSON/],
      ['{"domain": "api", "descriptors": [', /not YAML or JSON/],
      [JSON.stringify({ domain: 'nope', descriptors: [{ key: 'user', value: 'a', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] }), /unknown domain "nope"/],
      [JSON.stringify({ domain: 'api', descriptors: [{ key: 'team', value: 'a', rate_limit: { unit: 'minute', requests_per_unit: 1 } }] }), /no rule of domain api matches the path api\|team=a/],
      [JSON.stringify({ domain: 'api', descriptors: [{ key: 'user', value: 'a', rate_limit: { unit: 'minute', requests_per_unit: -1 } }] }), /requests_per_unit/],
      [JSON.stringify({ domain: 'api', descriptors: [{ key: 'user', value: 'a', rate_limit: { unit: 'minute', requests_per_unit: 1 } }], expires: 'tomorrow' }), /expires: a duration like/],
      [JSON.stringify({ domain: 'api', descriptors: [{ key: 'user', value: 'a', rate_limit: { unit: 'minute', requests_per_unit: 1 } }], expires: 3600 }), /give a unit/],
      [JSON.stringify(Array.from({ length: 101 }, () => ({}))), /at most 100/],
      ['', /no override here/],
      ['"just a string"', /an override is \{ domain, descriptors, expires\? \}/],
    ];
    for (const [body, message] of cases) {
      const answer = await admin('PUT', '/v1/overrides', body);
      expect(answer.status, body).toBe(400);
      expect(answer.body.message, body).toMatch(message);
    }
    const tooBig = await admin('PUT', '/v1/overrides', 'x'.repeat(300 * 1024));
    expect(tooBig.status).toBe(413);
    expect((await admin('PUT', '/v1/overrides', YAML_PUT, 'wrong-token-0123456789')).status).toBe(401);
    expect((await admin('GET', '/v1/overrides')).body.overrides).toEqual([]);
  });
});
