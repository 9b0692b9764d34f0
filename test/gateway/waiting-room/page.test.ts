/**
 * What a waiting client gets from one gateway node on the memory store: the waiting page (503,
 * `Cache-Control: no-store`, never a redirect, refreshing itself) or its JSON form; a template of
 * the operator's with every value escaped; the order of decisions (the waiting room before the
 * route's rate limits); and the metrics on the admin port's /metrics.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileTemplate, renderPage, type PageTemplate } from '../../../src/gateway/waiting-room/page.js';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../../support/gateway.js';
import { Jar, positionOf, roomRoute, useRoomSecret } from '../../support/waiting-room.js';

const TEMPLATE = join(mkdtempSync(join(tmpdir(), 'tollgate-wr-page-')), 'page.html');
const RULES = `domain: shop
descriptors:
  - { key: generic_key, value: deny, rate_limit: { unit: minute, requests_per_unit: 0 } }
`;

describe('the waiting page, on one node (memory store)', () => {
  let upstream: Upstream;
  let gateway: TestGateway;
  const clock = new TestClock();
  const waiting = new Jar('waiting');

  beforeAll(async () => {
    useRoomSecret();
    writeFileSync(TEMPLATE, '<main>{{room}} #{{position}} of {{queue_length}}, {{wait}}</main>\n');
    upstream = await startUpstream();
    const limited = `${roomRoute('/limited', { room: 'limited', active_users: 1 })}    domain: shop\n    rate_limits: [{ actions: [{ generic_key: { descriptor_value: deny } }] }]\n`;
    const config = `upstreams: { app: "${upstream.url}" }\nroutes:\n${roomRoute('/custom', { room: 'custom', active_users: 1, template: TEMPLATE })}${limited}${roomRoute('/', { room: 'main', active_users: 1 })}`;
    gateway = await startTestGateway(config, RULES, { clock });
  });

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('answers a queued browser the page: 503, no-store, no redirect, its place and wait, refreshing itself', async () => {
    const inside = new Jar('inside');
    expect((await inside.join(gateway.url('/'))).status).toBe(200);
    await waiting.get(gateway.url('/'), { html: true });
    const page = await waiting.get(gateway.url('/'), { html: true });
    expect(page.status).toBe(503);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers.location).toBeUndefined();
    expect(page.headers.refresh).toBe('5');
    expect(page.headers['retry-after']).toBe('5');
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.body).toContain('<meta http-equiv="refresh" content="5">');
    expect(page.body).toContain('<p class="position" id="position">1</p>');
    expect(page.body).toContain('Estimated wait: <strong id="wait">about 1 minute</strong>');
    const head = await send(gateway.url('/'), { method: 'HEAD', headers: { cookie: waiting.header()!, accept: 'text/html' } });
    expect([head.status, head.body]).toEqual([503, '']);
  });

  it('answers JSON to a client that asks for it: position, estimated wait, retry-after', async () => {
    const late = new Jar('late');
    await late.get(gateway.url('/'));
    const answer = await late.get(gateway.url('/'));
    expect(answer.status).toBe(503);
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(answer.body)).toEqual({
      error: 'waiting_room',
      message: 'you are number 2 in the queue; ask again in 5 s (keep the cookie: it holds your place)',
      position: 2,
      queueLength: 2,
      estimatedWaitSeconds: 120,
      retryAfter: 5,
    });
  });

  it("renders the operator's template, every inserted value escaped", () => {
    const template = compileTemplate('<h1>{{room}}</h1><p title="{{ wait }}">{{position}}/{{queue_length}} in {{wait_seconds}} s, every {{refresh_seconds}} s</p>') as PageTemplate;
    expect(renderPage(template, { room: '<script>alert("x")</script>&\'', position: 3, queueLength: 7, waitMs: 61_000, refreshMs: 5_000 })).toBe(
      '<h1>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</h1><p title="about 2 minutes">3/7 in 61 s, every 5 s</p>',
    );
    expect(compileTemplate('{{position}} {{secret}}')).toBe('unknown placeholder {{secret}}');
  });

  it('serves a template file given in the configuration', async () => {
    const inside = new Jar('custom-inside');
    const waiting = new Jar('custom-waiting');
    expect((await inside.join(gateway.url('/custom'))).status).toBe(200);
    await waiting.get(gateway.url('/custom'), { html: true });
    const page = await waiting.get(gateway.url('/custom'), { html: true });
    expect([page.status, page.body]).toEqual([503, '<main>custom #1 of 1, about 1 minute</main>\n']);
  });

  it('decides the waiting room before the rate limits: a queued request is never counted, an admitted one meets the limit', async () => {
    const inside = new Jar('limited-inside');
    const waiting = new Jar('limited-waiting');
    const checks = async () =>
      (await (await fetch(gateway.admin('/metrics'))).text())
        .split('\n')
        .filter((line) => line.startsWith('tollgate_checks_total{') && line.includes('domain="shop"'))
        .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    expect((await inside.join(gateway.url('/limited'))).status).toBe(429);
    const before = await checks();
    expect(before).toBeGreaterThan(0);
    expect(positionOf(await waiting.join(gateway.url('/limited')))).toBe(1);
    expect(positionOf(await waiting.get(gateway.url('/limited')))).toBe(1);
    expect(await checks()).toBe(before);
    expect((await inside.get(gateway.url('/limited'))).status).toBe(429);
  });

  it('exports queue length, active sessions, admissions and waits on /metrics', async () => {
    // The first session ends: the head of the queue (the waiting browser) is admitted when it asks again.
    clock.now += 61_000;
    const page = await waiting.get(gateway.url('/'), { html: true });
    expect([page.status, page.body]).toEqual([200, 'upstream GET /']);
    const metrics = await (await fetch(gateway.admin('/metrics'))).text();
    expect(metrics).toMatch(/tollgate_waiting_room_queue_length\{room="main"\} \d+/);
    expect(metrics).toMatch(/tollgate_waiting_room_active_sessions\{room="main"\} 1/);
    expect(metrics).toMatch(/tollgate_waiting_room_admitted_total\{room="main"\} [2-9]/);
    expect(metrics).toMatch(/tollgate_waiting_room_wait_seconds_count\{room="main"\} 2/);
    expect(metrics).toMatch(/tollgate_waiting_room_wait_seconds_bucket\{le="120",room="main"\} 2/);
    expect(metrics).toMatch(/tollgate_waiting_room_wait_seconds_bucket\{le="60",room="main"\} 1/);
    expect(metrics).toMatch(/tollgate_waiting_room_pages_total\{room="main"\} \d+/);
  });
});

