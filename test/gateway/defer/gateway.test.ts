/**
 * `on_limit: defer` end to end, over loopback against a real redis-server: a burst on a defer
 * route is partly proxied and partly answered 202 with tickets; the gateway's drain worker replays
 * the deferred requests at the rule's rate (through the same limiter as live traffic), once each,
 * in order, intact, with the ticket as Tollgate-Ticket (and Idempotency-Key, as the clients sent none);
 * the tickets read delivered at the status URL.
 * The queue's bound (429), the body cap (413), the reserved status path, and defer on the memory
 * store (exit 2) are refused as documented. The crash case runs the gateway as a real process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGatewayConfig, parseGatewayConfig } from '../../../src/gateway/config/read.js';
import { loadRules } from '../../../src/rules/load.js';
import { eventually, startUpstream, type Upstream } from '../../support/defer-upstream.js';
import { send, startTestGateway, type TestGateway } from '../../support/gateway.js';
import { stopProcess } from '../../support/redis.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const CLI = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
/** 5 a second, 2 at once: a deferred request every 200 ms once the burst has emptied the bucket. */
const PER_SECOND = 5;
const RULES = `domain: jobs
descriptors:
  - { key: client, value: paced, rate_limit: { unit: second, requests_per_unit: ${PER_SECOND}, algorithm: token-bucket, burst: 2 } }
  # Per client address: on replay the address comes from the stored request, or the descriptor would be dropped (unlimited).
  - key: client
    value: per-address
    descriptors: [{ key: remote_address, rate_limit: { unit: second, requests_per_unit: ${PER_SECOND}, algorithm: token-bucket, burst: 2 } }]
  - { key: client, value: fast, rate_limit: { unit: second, requests_per_unit: 20, algorithm: token-bucket, burst: 2 } }
  - { key: client, value: closed, rate_limit: { unit: hour, requests_per_unit: 0 } }
`;
const defer = (prefix: string, client: string, block: string, more = '') => `  - match: { prefix: ${prefix} }
    upstream: app
    domain: jobs
    on_limit: defer
    defer: ${block}
    rate_limits: [{ actions: [{ generic_key: { descriptor_key: client, descriptor_value: ${client} } }${more}] }]
`;
const CONFIG = (upstream: string, extra = '') => `listen: 0
upstreams: { app: "${upstream}" }
routes:
${defer('/jobs', 'per-address', '{ queue: jobs, reclaim_after: 1s }', ', { remote_address: {} }')}${defer('/closed', 'closed', '{ max_length: 2, max_body: 16 }')}${extra}`;

const redis = useRedisServer();
const statusOf = async (gateway: TestGateway, url: string) => JSON.parse((await send(gateway.url(url))).body) as Record<string, unknown>;

describe('a defer route in the gateway process', () => {
  let upstream: Upstream;
  let gateway: TestGateway;
  beforeAll(async () => {
    upstream = await startUpstream((request) => ({ status: 201, body: `done ${request.path}`, headers: { 'x-upstream': 'yes' } }));
    gateway = await startTestGateway(CONFIG(upstream.url), RULES, { flags: { redis: redis.url } });
  }, 20_000);
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('proxies the bucket, defers the rest with 202 and tickets, and replays each once, in order, at the rule rate', async () => {
    const burst = 10;
    const answers = [];
    // One after another: the order of the 202s is the order of the queue.
    for (let i = 0; i < burst; i++) {
      answers.push(await send(gateway.url(`/jobs/${i}?n=${i}`), { method: 'POST', headers: { 'content-type': 'text/plain', 'x-job': String(i) }, body: `payload ${i}` }));
    }
    const proxied = answers.filter((answer) => answer.status === 201);
    const deferred = answers.filter((answer) => answer.status === 202);
    expect(proxied.length + deferred.length).toBe(burst);
    expect(proxied.length).toBeGreaterThanOrEqual(2);
    expect(deferred.length).toBeGreaterThanOrEqual(3);
    const tickets = deferred.map((answer) => JSON.parse(answer.body) as { ticket: string; status_url: string; position: number });
    for (const [i, ticket] of tickets.entries()) {
      expect(ticket.ticket).toMatch(/^jobs\.[A-Za-z0-9_-]{22}$/);
      expect(ticket.status_url).toBe(`/_tollgate/deferred/${ticket.ticket}`);
      expect(deferred[i]!.headers.location).toBe(ticket.status_url);
      expect(ticket.position).toBeGreaterThanOrEqual(1);
    }
    await eventually(async () => (await Promise.all(tickets.map((t) => statusOf(gateway, t.status_url)))).every((s) => s.state === 'delivered'), 'every ticket delivered', 15_000);

    const replays = upstream.received.filter((request) => request.headers['idempotency-key'] !== undefined);
    expect(replays.map((request) => request.headers['idempotency-key'])).toEqual(tickets.map((t) => t.ticket));
    expect(replays.map((request) => request.headers['tollgate-ticket'])).toEqual(tickets.map((t) => t.ticket));
    const firstDeferred = answers.findIndex((answer) => answer.status === 202);
    for (const [i, replay] of replays.entries()) {
      const n = answers.indexOf(deferred[i]!);
      expect(n).toBeGreaterThanOrEqual(firstDeferred);
      expect(replay.method).toBe('POST');
      expect(replay.path).toBe(`/jobs/${n}?n=${n}`);
      expect(replay.body.toString()).toBe(`payload ${n}`);
      expect(replay.headers['x-job']).toBe(String(n));
      expect(replay.headers['content-type']).toBe('text/plain');
      expect(replay.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(replay.headers['x-tollgate-client-peer']).toBeUndefined();
    }
    // One token per 200 ms: n replays span at least (n - 1) × 100 ms, with a generous tolerance for a loaded machine.
    const span = replays.at(-1)!.at - replays[0]!.at;
    expect(span).toBeGreaterThanOrEqual((replays.length - 1) * (1_000 / PER_SECOND) * 0.6);

    const done = await statusOf(gateway, tickets[0]!.status_url);
    expect(done).toMatchObject({ state: 'delivered', attempts: 1, response: { status: 201, body: `done ${replays[0]!.path}`, body_encoding: 'utf8', body_truncated: false } });
    expect((done.response as { headers: [string, string][] }).headers).toContainEqual(['x-upstream', 'yes']);
    const metrics = (await send(gateway.admin('/metrics'))).body;
    expect(metrics).toContain(`tollgate_deferred_enqueued_total{queue="jobs"} ${deferred.length}`);
    expect(metrics).toContain(`tollgate_deferred_delivered_total{queue="jobs"} ${deferred.length}`);
    expect(metrics).toMatch(/tollgate_deferred_queue_length\{queue="jobs"\} 0/);
  }, 30_000);

  it('answers 429 past max_length, 413 past max_body, and 404 for a ticket it never issued', async () => {
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await send(gateway.url('/closed'), { method: 'POST', body: 'small' })).status);
    expect(statuses).toEqual([202, 202, 429]);
    const big = await send(gateway.url('/closed'), { method: 'POST', body: 'x'.repeat(17) });
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toMatchObject({ error: 'payload_too_large' });
    expect((await send(gateway.url('/_tollgate/deferred/jobs.AAAAAAAAAAAAAAAAAAAAAA'))).status).toBe(404);
    expect((await send(gateway.url('/_tollgate/deferred/not-a-ticket'))).status).toBe(404);
    const metrics = (await send(gateway.admin('/metrics'))).body;
    expect(metrics).toContain('tollgate_deferred_refused_total{queue="jobs:1"} 1');
  }, 20_000);

  it('a configuration reload starts the worker of a new defer route', async () => {
    writeFileSync(join(gateway.dir, 'gateway.yaml'), `rules: ./rules.yaml\n${CONFIG(upstream.url, defer('/late', 'paced', '{ queue: late }'))}`);
    await eventually(() => gateway.gateway.state().routes.length === 3, 'the reload', 10_000);
    const tickets: string[] = [];
    for (let i = 0; i < 6 && tickets.length === 0; i++) {
      const answer = await send(gateway.url(`/late/${i}`), { method: 'POST', body: 'late' });
      if (answer.status === 202) tickets.push((JSON.parse(answer.body) as { status_url: string }).status_url);
    }
    expect(tickets).toHaveLength(1);
    await eventually(async () => (await statusOf(gateway, tickets[0]!)).state === 'delivered', 'the late ticket delivered', 10_000);
  }, 20_000);
});

describe('configuration', () => {
  it('loads examples/gateway/defer.yaml as docs/gateway.md describes it, with its rules', async () => {
    const config = loadGatewayConfig(new URL('../../../examples/gateway/defer.yaml', import.meta.url).pathname);
    expect(config.routes[0]).toMatchObject({ onLimit: 'defer', defer: { queue: 'orders', maxLength: 1000, maxBodyBytes: 1_048_576, maxAttempts: 5, resultTtlMs: 3_600_000, reclaimAfterMs: 30_000 } });
    expect((await loadRules(config.rules!)).domain('orders')).toBeDefined();
    // The default queue name: <domain>:<route index>.
    expect(parseGatewayConfig(CONFIG('http://127.0.0.1:1'), 'gw.yaml', '/').routes[1]!.defer!.queue).toBe('jobs:1');
  });

  it('refuses a route the status path would hide, and two defer routes on one queue, with file:line:col', () => {
    const config = CONFIG('http://127.0.0.1:1', `  - match: { prefix: /_tollgate/deferred/x }
    upstream: app
${defer('/other', 'paced', '{ queue: jobs }')}`);
    expect(() => parseGatewayConfig(config, 'gw.yaml', '/')).toThrow(/gw\.yaml:\d+:\d+: routes\[2\]\.match: paths under \/_tollgate\/deferred\/[^\n]*\n[^\n]*routes\[3\]\.defer\.queue: queue "jobs" is already the queue of routes\[0\]/);
    expect(() => parseGatewayConfig(CONFIG('http://127.0.0.1:1').replace('max_length: 2', 'max_lenght: 2'), 'gw.yaml', '/')).toThrow(/unknown key "max_lenght"; did you mean "max_length"\?/);
  });

  it('a defer route on the memory store exits 2 naming --redis', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-defer-'));
    try {
      writeFileSync(join(dir, 'gateway.yaml'), CONFIG('http://127.0.0.1:1'));
      const child = spawn(process.execPath, [CLI, 'gateway', '--config', join(dir, 'gateway.yaml'), '--port', '0', '--admin-port', '0'], { timeout: 20_000 });
      let err = '';
      child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(2);
      expect(err).toMatch(/gateway\.yaml:\d+: on_limit: defer keeps throttled requests in Redis: start the gateway with --redis URL/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 25_000);
});

/** Starts `tollgate gateway` as a process; resolves with it and its proxy port once it listens. */
async function startGatewayProcess(configPath: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [CLI, 'gateway', '--config', configPath, '--redis', redis.url, '--port', '0', '--admin-port', '0', '--host', '127.0.0.1', '--drain-delay', '0', '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  let port: number | undefined;
  await eventually(() => {
    const line = out.split('\n').find((text) => text.includes('gateway listening'));
    port = line === undefined ? undefined : (JSON.parse(line) as { port: number }).port;
    return port !== undefined || child.exitCode !== null;
  }, 'the gateway process listening', 15_000);
  if (port === undefined) throw new Error(`the gateway exited: ${out}`);
  return { child, port };
}

describe('a gateway process SIGKILLed mid-drain', () => {
  const BOUND = 12;
  const HANGING = 2;
  let upstream: Upstream;
  let client: Redis;
  const children: ChildProcess[] = [];
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-defer-crash-'));
    // The third replay hangs: the gateway is killed with it in flight.
    let replays = 0;
    upstream = await startUpstream((request) => ({ status: 200, body: 'ok', ...(request.headers['idempotency-key'] !== undefined && replays++ === HANGING ? { hang: true } : {}) }));
    client = new Redis(redis.url);
  });
  afterAll(async () => {
    await Promise.all(children.filter((child) => child.exitCode === null).map((child) => stopProcess(child)));
    client?.disconnect();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('restarted, delivers every deferred request: one key each, the one in flight at most twice, the bound held', async () => {
    writeFileSync(join(dir, 'rules.yaml'), RULES);
    writeFileSync(join(dir, 'gateway.yaml'), `rules: ./rules.yaml
listen: 0
upstreams: { app: "${upstream.url}" }
routes:
${defer('/crash', 'fast', `{ queue: crash, max_length: ${BOUND}, reclaim_after: 1s }`)}`);
    const accepted: string[] = [];
    let longest = 0;
    const sampler = setInterval(() => void client.xlen('tollgate:defer:{crash}:stream').then((length) => (longest = Math.max(longest, length)), () => undefined), 10);
    const burst = async (port: number, count: number): Promise<number[]> => {
      const statuses = [];
      for (let i = 0; i < count; i++) {
        const answer = await send(`http://127.0.0.1:${port}/crash/${accepted.length}-${i}`, { method: 'POST', body: `job ${i}` });
        if (answer.status === 202) accepted.push((JSON.parse(answer.body) as { ticket: string }).ticket);
        statuses.push(answer.status);
      }
      return statuses;
    };
    try {
      const first = await startGatewayProcess(join(dir, 'gateway.yaml'));
      children.push(first.child);
      await burst(first.port, 10);
      const keyed = () => upstream.received.filter((request) => request.headers['idempotency-key'] !== undefined);
      await eventually(() => keyed().length === HANGING + 1, 'the hanging replay', 10_000);
      await stopProcess(first.child); // SIGKILL
      expect(((await client.call('XPENDING', 'tollgate:defer:{crash}:stream', 'tollgate-drain')) as unknown[])[0]).toBe(1);

      const second = await startGatewayProcess(join(dir, 'gateway.yaml'));
      children.push(second.child);
      // More than the bound leaves room for, while the restarted gateway drains: some are refused with 429.
      const statuses = await burst(second.port, 20);
      expect(statuses).toContain(429);
      await eventually(async () => {
        const states = await Promise.all(accepted.map(async (ticket) => (await send(`http://127.0.0.1:${second.port}/_tollgate/deferred/${ticket}`)).body));
        return states.every((body) => body.includes('"state":"delivered"'));
      }, 'every accepted ticket delivered', 20_000);
      // SIGTERM: the workers stop and the process exits 0.
      const exited = new Promise<number | null>((resolve) => second.child.once('exit', resolve));
      second.child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      clearInterval(sampler);
    }
    const keys = upstream.keys().filter((key) => key !== 'undefined');
    expect(new Set(keys)).toEqual(new Set(accepted));
    const repeated = keys.filter((key, i) => keys.indexOf(key) !== i);
    expect(repeated.length).toBeLessThanOrEqual(1);
    if (repeated.length === 1) expect(repeated[0]).toBe(keys[HANGING]);
    expect(longest).toBeLessThanOrEqual(BOUND);
  }, 60_000);
});
