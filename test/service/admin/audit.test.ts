/**
 * The audit log over real HTTP, the service's logger captured: each admin action (push, block,
 * unblock, reset) leaves exactly one line saying who, what and how it ended; a flood of failed
 * logins leaves a bounded number of lines and summaries that account for every attempt; no line
 * carries a token; the Bearer scheme is matched case-insensitively.
 */
import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAILED_LOGIN_LINES_PER_SECOND } from '../../../src/service/admin/audit.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';

const TOKEN = 'audit-test-admin-token-0123456789';
const WRONG = 'audit-test-wrong-token-9876543210';
const TOKEN_ID = createHash('sha256').update(TOKEN).digest('hex').slice(0, 8);
const RULES = 'domain: audited\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n';

type Line = Record<string, unknown>;

async function start(flags: Record<string, string>): Promise<{ service: RunningService; logs: Line[]; raw: string[]; url: (path: string) => string }> {
  const logs: Line[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) {
        if (line === '') continue;
        raw.push(line);
        logs.push(JSON.parse(line) as Line);
      }
      done();
    },
  });
  const service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', ...flags }, {}), pino({ level: 'info' }, sink), { grpc: false });
  return { service, logs, raw, url: (path) => `http://127.0.0.1:${service.adminPort}${path}` }; // the admin listener: rules, metrics, admin API (and health)
}

const auditLines = (logs: Line[]): Line[] => logs.filter((line) => line.audit === true);

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('the audit log, admin token configured', () => {
  let node: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    node = await start({ 'admin-token': TOKEN });
  }, 20_000);
  afterAll(async () => node?.service.close());

  /** Sends one admin request and returns its status and the audit lines it added. */
  async function admin(method: string, path: string, authorization: string, body?: string): Promise<{ status: number; lines: Line[] }> {
    const before = auditLines(node.logs).length;
    const response = await fetch(node.url(path), { method, headers: { authorization, 'content-type': 'application/json' }, ...(body !== undefined ? { body } : {}) });
    await response.arrayBuffer();
    // The line is written before the answer leaves; a moment for the sink all the same.
    await until(() => auditLines(node.logs).length > before);
    return { status: response.status, lines: auditLines(node.logs).slice(before) };
  }

  it('leaves exactly one line per admin action: who, what, result and status (scheme matched case-insensitively)', async () => {
    const who = { remoteAddress: expect.stringMatching(/127\.0\.0\.1$/), tokenId: TOKEN_ID, component: 'audit' };
    const push = await admin('PUT', '/v1/rules', `bearer ${TOKEN}`, RULES);
    expect(push.status).toBe(200);
    expect(push.lines).toEqual([expect.objectContaining({ ...who, action: 'rules.push', domains: ['audited'], result: 'ok', status: 200 })]);

    const block = await admin('POST', '/v1/keys/block', `BEARER   ${TOKEN}`, JSON.stringify({ key: 'user:7', ttlMs: 60_000 }));
    expect(block.status).toBe(200);
    expect(block.lines).toEqual([expect.objectContaining({ ...who, action: 'keys.block', key: 'user:7', result: 'ok', status: 200 })]);

    const unblock = await admin('DELETE', '/v1/keys/block?key=user:7', `Bearer ${TOKEN}`);
    expect(unblock.lines).toEqual([expect.objectContaining({ ...who, action: 'keys.unblock', key: 'user:7', result: 'ok', status: 200 })]);

    const reset = await admin('DELETE', '/v1/keys?key=user:8&algorithm=fixed-window&limit=5&window=1m', `Bearer ${TOKEN}`);
    expect(reset.lines).toEqual([expect.objectContaining({ ...who, action: 'keys.reset', key: 'user:8', result: 'ok', status: 200 })]);

    const broken = await admin('PUT', '/v1/rules', `Bearer ${TOKEN}`, 'domain: [');
    expect(broken.status).toBe(400);
    expect(broken.lines).toEqual([expect.objectContaining({ ...who, action: 'rules.push', result: 'error', status: 400 })]);
  });

  it('refuses a scheme glued to its token, and an inspection with a good token leaves no line', async () => {
    const glued = await fetch(node.url('/v1/keys/blocked'), { headers: { authorization: `Bearer${TOKEN}` } });
    expect(glued.status).toBe(401);
    const before = auditLines(node.logs).length;
    const inspect = await fetch(node.url('/v1/keys/blocked'), { headers: { authorization: `bEaReR ${TOKEN}` } });
    expect(inspect.status).toBe(200);
    await inspect.arrayBuffer();
    expect(auditLines(node.logs).length).toBe(before);
  });

  // Last of its service: the wrong tokens leave 127.0.0.1 locked out.
  it('bounds 50 failed logins to a few lines, with summaries accounting for every one, and never logs a token', async () => {
    const wrongHeaders = [`Bearer ${WRONG}`, `Basic ${Buffer.from(`admin:${WRONG}`).toString('base64')}`, ''];
    const before = auditLines(node.logs).length;
    const started = Date.now();
    for (let i = 0; i < 50; i += 1) {
      const authorization = wrongHeaders[i % wrongHeaders.length]!;
      const response = await fetch(node.url('/v1/keys/block'), { method: 'POST', headers: authorization === '' ? {} : { authorization }, body: '{"key":"x"}' });
      // Past 5 wrong Bearer tokens the address is locked out (backoff.ts): 429, still a failed login.
      expect([401, 429]).toContain(response.status);
      await response.arrayBuffer();
    }
    const windows = Math.ceil((Date.now() - started) / 1_000) + 1;
    const failed = (): Line[] => auditLines(node.logs).slice(before).filter((line) => line.action === 'auth.failed');
    const accounted = (): number => failed().reduce((sum, line) => sum + (typeof line.suppressed === 'number' ? line.suppressed : 1), 0);
    await until(() => accounted() === 50);

    const single = failed().filter((line) => line.suppressed === undefined);
    const summaries = failed().filter((line) => line.suppressed !== undefined);
    // Earlier tests of this service may have spent part of this second's lines for 127.0.0.1.
    expect(single.length).toBeGreaterThanOrEqual(1);
    expect(single.length).toBeLessThanOrEqual(FAILED_LOGIN_LINES_PER_SECOND * windows);
    expect(summaries.length).toBeGreaterThanOrEqual(1);
    expect(summaries.length).toBeLessThanOrEqual(windows);
    expect(summaries[0]).toMatchObject({ result: 'denied', remoteAddress: expect.stringMatching(/127\.0\.0\.1$/), msg: expect.stringMatching(/^suppressed \d+ failed logins from .*127\.0\.0\.1$/) });
    expect(single[0]).toMatchObject({ target: 'POST /v1/keys/block', result: 'denied', status: 401, reason: 'wrong token', tokenId: createHash('sha256').update(WRONG).digest('hex').slice(0, 8) });
    expect(single.map((line) => line.reason)).toEqual(expect.arrayContaining(['not a Bearer token', 'no Authorization header']));

    // Neither the admin token nor a wrong one (a typo of the real one, perhaps) appears anywhere.
    const everything = node.raw.join('\n');
    expect(everything).not.toContain(TOKEN);
    expect(everything).not.toContain(WRONG);
    expect(everything).not.toContain(Buffer.from(`admin:${WRONG}`).toString('base64'));
  }, 20_000);
});

describe('the audit log, admin endpoints disabled', () => {
  it('logs a refused admin request as a failed login (403, admin disabled)', async () => {
    const node = await start({});
    try {
      const response = await fetch(node.url('/v1/rules'), { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: RULES });
      expect(response.status).toBe(403);
      await until(() => auditLines(node.logs).length === 1);
      expect(auditLines(node.logs)[0]).toMatchObject({ action: 'auth.failed', target: 'PUT /v1/rules', reason: 'admin disabled', status: 403, tokenId: TOKEN_ID });
    } finally {
      await node.service.close();
    }
  }, 20_000);
});
