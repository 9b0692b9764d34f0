/**
 * The service starts and heals without a person, and drains on SIGTERM. Real `tollgate serve`
 * processes and real redis-server processes on free ports:
 * - started with nothing listening at its Redis address, it stays up (alive, not ready, gRPC
 *   NOT_SERVING, checks answered), and is ready within a second of Redis answering PING (the figure
 *   is printed), with the --config rules in force at once and pushed rules reaching it;
 * - on SIGTERM it says draining at once, serves every request for the drain delay, lets a slow
 *   in-flight upload finish, and exits 0; a second signal skips the rest of the delay;
 * - bad shutdown flags exit 2 at once.
 * docs/operations.md, "Start and shutdown", quotes the figures.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimitClient } from '../../support/grpc-client.js';
import { freePort, startRedis, startRedisOn, type RedisServer } from '../../support/redis.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

const CLI = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
const TOKEN = 'lifecycle-admin-token-0123456789';
const RULES = `domain: life
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
`;
const PUSHED = `domain: pushed
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly headers: Record<string, string | string[] | undefined>;
}

/** One HTTP request; rejects with the socket error (its `code`: ECONNREFUSED, ECONNRESET, ...). */
function send(port: number, method: string, path: string, body?: string, agent?: Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent: agent ?? false, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: text, headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const check = (user: string, domain = 'life') => JSON.stringify({ domain, descriptors: [{ user }] });

/** Time (epoch ms) at which `port` first answers PING with +PONG, polling every 5 ms. */
async function firstPong(port: number, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const pong = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.setTimeout(200, () => socket.destroy());
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.once('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.once('close', () => resolve(false));
      socket.once('error', () => resolve(false));
    });
    if (pong) return Date.now();
    await sleep(5);
  }
  throw new Error(`no PONG on ${port}`);
}

/** Time (epoch ms) at which GET /readyz first answers 200, polling every 20 ms. */
async function firstReady(service: ServiceProcess, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answer = await send(service.httpPort, 'GET', '/readyz').catch(() => undefined);
    if (answer?.status === 200) return Date.now();
    await sleep(20);
  }
  throw new Error('never ready');
}

describe('start with Redis down', () => {
  let dir: string;
  let redisPort: number;
  let redis: RedisServer | undefined;
  let service: ServiceProcess;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-life-'));
    writeFileSync(join(dir, 'life.yaml'), RULES);
    redisPort = await freePort();
    service = await startServiceProcess(['--config', dir, '--redis', `redis://127.0.0.1:${redisPort}`, '--admin-token', TOKEN, '--host', '127.0.0.1']);
  }, 20_000);

  afterAll(async () => {
    expect(await service.stop()).toBe(0);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stays up: alive, not ready with the reason, gRPC NOT_SERVING, checks answered, one warning', async () => {
    const warnings = service.logs.filter((line) => line.msg === 'store unreachable at start; serving by the failure modes until it answers');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, address: `redis://127.0.0.1:${redisPort}` });
    expect(JSON.stringify(warnings[0]!.err)).toMatch(/ECONNREFUSED/);

    expect((await send(service.httpPort, 'GET', '/healthz')).status).toBe(200);
    const ready = await send(service.httpPort, 'GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toMatchObject({ status: 'not_ready', notReady: ['store'], store: 'redis', storeReachable: false, domains: ['life'] });

    const grpc = rateLimitClient(service.grpcPort!);
    try {
      expect(await grpc.health()).toBe('NOT_SERVING');
    } finally {
      grpc.close();
    }

    // The decision path answers by its failure mode; today within its deadline, at worst the 5 s connect wait.
    const started = Date.now();
    const answer = await send(service.httpPort, 'POST', '/v1/check', check('down'));
    const tookMs = Date.now() - started;
    expect([200, 429, 503]).toContain(answer.status);
    expect(tookMs).toBeLessThan(6_000);
    console.log(`lifecycle: a check with Redis down answered ${answer.status} in ${tookMs} ms`);
    await sleep(300);
    expect(service.child.exitCode).toBeNull();
    expect(service.logs.filter((line) => (line.level as number) >= 50)).toEqual([]);
  });

  it('is ready within a second of Redis answering PING; gRPC Watch says SERVING; --config rules decide on Redis', async () => {
    const grpc = rateLimitClient(service.grpcPort!);
    const watch = grpc.watchHealth();
    await sleep(100);
    expect(watch.statuses).toEqual(['NOT_SERVING']);

    const readyAt = firstReady(service);
    const pongAt = firstPong(redisPort);
    redis = await startRedisOn(redisPort);
    const [pong, ready] = await Promise.all([pongAt, readyAt]);
    const gap = ready - pong;
    console.log(`lifecycle: Redis answered PING → /readyz 200 in ${gap} ms`);
    expect(gap).toBeLessThan(1_000);

    const servingBy = Date.now() + 1_000;
    while (!watch.statuses.includes('SERVING') && Date.now() < servingBy) await sleep(10);
    expect(watch.statuses).toEqual(['NOT_SERVING', 'SERVING']);
    watch.cancel();
    grpc.close();
    expect(JSON.parse((await send(service.httpPort, 'GET', '/readyz')).body)).toMatchObject({ status: 'ready', storeReachable: true });
    // Its return is logged as its absence was: one info line.
    expect(service.logs.filter((line) => line.msg === 'store reachable again; deciding on the shared store')).toEqual([expect.objectContaining({ level: 30, address: `redis://127.0.0.1:${redisPort}` })]);

    // The rule from --config (3 a minute), now counted in Redis.
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) codes.push((await send(service.httpPort, 'POST', '/v1/check', check('up'))).status);
    expect(codes).toEqual([200, 200, 200, 429]);
    expect(redis.cli('--scan', '--pattern', 'tollgate:*').trim()).not.toBe('');
    expect(redis.cli('SCRIPT', 'EXISTS', scriptSha()).trim()).toBe('1');
  });

  it('rules pushed through Redis after it came up reach the node (its sync started in the background)', async () => {
    // Pushed from another node: this node learns of it only through its own sync.
    const pusher = await startServiceProcess(['--redis', `redis://127.0.0.1:${redisPort}`, '--admin-token', TOKEN, '--host', '127.0.0.1']);
    try {
      const put = await fetch(pusher.admin('/v1/rules'), { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: PUSHED });
      expect(put.status).toBe(200);
      const by = Date.now() + 2_000;
      let domains: string[] = [];
      while (!domains.includes('pushed') && Date.now() < by) {
        domains = (JSON.parse((await send(service.adminPort, 'GET', '/v1/rules')).body) as { domains: string[] }).domains;
        await sleep(20);
      }
      expect(domains).toEqual(expect.arrayContaining(['life', 'pushed']));
      const codes: number[] = [];
      for (let i = 0; i < 3; i++) codes.push((await send(service.httpPort, 'POST', '/v1/check', check('p', 'pushed'))).status);
      expect(codes).toEqual([200, 200, 429]);
    } finally {
      expect(await pusher.stop()).toBe(0);
    }
  });
  it('heals again after a later outage: not ready while Redis is gone, ready within a second of it answering', async () => {
    await redis!.stop();
    redis = undefined;
    let notReady = false;
    const by = Date.now() + 2_000;
    while (!notReady && Date.now() < by) {
      notReady = (await send(service.httpPort, 'GET', '/readyz')).status === 503;
      if (!notReady) await sleep(5);
    }
    expect(notReady).toBe(true);
    await sleep(1_000);
    const readyAt = firstReady(service);
    const pongAt = firstPong(redisPort);
    const server = await startRedisOn(redisPort);
    redis = server;
    const gap = (await readyAt) - (await pongAt);
    console.log(`lifecycle: after a 1 s outage, Redis answered PING → /readyz 200 in ${gap} ms`);
    expect(gap).toBeLessThan(1_000);
    // The new Redis holds nothing: the script is loaded again on connect.
    expect(server.cli('SCRIPT', 'EXISTS', scriptSha()).trim()).toBe('1');
    expect([200, 429]).toContain((await send(service.httpPort, 'POST', '/v1/check', check('after'))).status);
  });
});

/** The decision script's SHA1, as the service loads it when the connection comes up. */
function scriptSha(): string {
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', "import { DECIDE_SCRIPT } from './dist/store/redis/lua.js'; process.stdout.write(DECIDE_SCRIPT.sha1)"], { encoding: 'utf8' });
  return result.stdout.trim();
}

/** What each load client saw. */
interface Tally {
  ok: number;
  duringDrain: number;
  refused: number;
  errors: string[];
}

/** A keep-alive client sending checks back to back until the service refuses connections. */
async function loadClient(port: number, agent: Agent, tally: Tally, drainingSince: () => number | undefined, stop: () => boolean): Promise<void> {
  for (let i = 0; !stop(); i++) {
    try {
      const answer = await send(port, 'POST', '/v1/check', check(`load-${i % 50}`), agent);
      const body = JSON.parse(answer.body) as { overallCode?: string };
      if (![200, 429].includes(answer.status) || (body.overallCode !== 'OK' && body.overallCode !== 'OVER_LIMIT')) tally.errors.push(`bad answer ${answer.status} ${answer.body}`);
      else {
        tally.ok += 1;
        if (drainingSince() !== undefined) tally.duringDrain += 1;
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ECONNREFUSED') {
        tally.refused += 1;
        return;
      }
      tally.errors.push(`${code ?? ''} ${(error as Error).message}`);
    }
  }
}

/** Sends a check whose body trickles in over `ms`; resolves with the raw response. */
function slowUpload(port: number, ms: number): { response: Promise<string>; sent: Promise<void> } {
  const body = check('slow');
  const socket = connect({ host: '127.0.0.1', port });
  let text = '';
  const response = new Promise<string>((resolve, reject) => {
    socket.on('data', (chunk) => (text += chunk.toString()));
    socket.on('end', () => resolve(text));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
  const sent = (async () => {
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`POST /v1/check HTTP/1.1\r\nHost: tollgate\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
    const pieces = 10;
    for (let i = 0; i < pieces; i++) {
      socket.write(body.slice(Math.floor((i * body.length) / pieces), Math.floor(((i + 1) * body.length) / pieces)));
      await sleep(ms / pieces);
    }
  })();
  return { response, sent };
}

describe('draining on SIGTERM', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-drain-'));
    writeFileSync(join(dir, 'life.yaml'), RULES.replace('requests_per_unit: 3', 'requests_per_unit: 1000000'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('not ready at once, serves everything for the drain delay, finishes a slow upload, exits 0', async () => {
    const service = await startServiceProcess(['--config', dir, '--drain-delay', '1s', '--host', '127.0.0.1']);
    const exited = new Promise<number>((resolve) => service.child.once('exit', () => resolve(Date.now())));
    const grpc = rateLimitClient(service.grpcPort!);
    const watch = grpc.watchHealth();
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    const tally: Tally = { ok: 0, duringDrain: 0, refused: 0, errors: [] };
    let sigtermAt: number | undefined = undefined as number | undefined;
    let exitedAt: number | undefined;
    void exited.then((at) => (exitedAt = at));
    const clients = Array.from({ length: 4 }, () => loadClient(service.httpPort, agent, tally, () => sigtermAt, () => exitedAt !== undefined));
    await sleep(300);
    expect(watch.statuses).toEqual(['SERVING']);

    // The slow upload starts before the signal and ends after the listeners closed (at +1,000 ms).
    const slow = slowUpload(service.httpPort, 1_400);
    await sleep(100);
    const beforeDrain = tally.ok;
    sigtermAt = Date.now();
    service.child.kill('SIGTERM');
    let notReadyAfter: number | undefined;
    while (notReadyAfter === undefined && Date.now() - sigtermAt < 1_000) {
      const answer = await send(service.httpPort, 'GET', '/readyz');
      if (answer.status === 503) {
        notReadyAfter = Date.now() - sigtermAt;
        expect(JSON.parse(answer.body)).toMatchObject({ status: 'draining', notReady: ['draining'] });
      } else await sleep(5);
    }
    expect(notReadyAfter).toBeLessThan(100);
    const servingBy = Date.now() + 300;
    while (!watch.statuses.includes('NOT_SERVING') && Date.now() < servingBy) await sleep(5);
    expect(watch.statuses.slice(0, 2)).toEqual(['SERVING', 'NOT_SERVING']);

    await slow.sent;
    const slowAnswer = await slow.response;
    const exitAt = await exited;
    await Promise.all(clients);
    agent.destroy();
    grpc.close();
    const exitMs = exitAt - sigtermAt;
    console.log(
      `lifecycle: drain 1000 ms: /readyz 503 after ${notReadyAfter} ms; ${tally.ok - beforeDrain} checks served after SIGTERM ` +
        `(${beforeDrain} before), ${tally.refused} refused after close, ${tally.errors.length} errors; exit after ${exitMs} ms`,
    );
    expect(tally.errors).toEqual([]);
    expect(tally.duringDrain).toBeGreaterThan(100);
    expect(tally.refused).toBe(4);
    expect(slowAnswer).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n\{"overallCode":"OK"/);
    expect(service.child.exitCode).toBe(0);
    expect(exitMs).toBeGreaterThanOrEqual(1_000);
    expect(exitMs).toBeLessThan(2_500);
    const draining = service.logs.find((line) => String(line.msg).startsWith('draining:'));
    expect(draining).toMatchObject({ drainDelayMs: 1_000 });
    expect(service.logs.at(-1)).toMatchObject({ msg: 'stopped' });
  }, 20_000);

  it('a second SIGTERM skips the rest of the drain delay', async () => {
    const service = await startServiceProcess(['--drain-delay', '60s', '--host', '127.0.0.1']);
    const started = Date.now();
    service.child.kill('SIGTERM');
    await sleep(200);
    expect((await send(service.httpPort, 'GET', '/readyz')).status).toBe(503);
    expect((await send(service.httpPort, 'GET', '/healthz')).status).toBe(200);
    service.child.kill('SIGTERM');
    expect(await service.stop()).toBe(0);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(service.logs.some((line) => line.msg === 'second signal: skipping the rest of the drain delay')).toBe(true);
  });

  it('with --workers 2, every worker drains and the primary waits for them', async () => {
    const redis = await startRedis();
    try {
      const service = await startServiceProcess(['--redis', redis.url, '--workers', '2', '--drain-delay', '500ms', '--host', '127.0.0.1']);
      const listening = Date.now() + 10_000;
      while (service.logs.filter((line) => String(line.msg).startsWith('gRPC listening')).length < 2 && Date.now() < listening) await sleep(20);
      const exited = new Promise<number | null>((resolve) => service.child.once('exit', (code) => resolve(code)));
      const started = Date.now();
      service.child.kill('SIGTERM');
      await sleep(100);
      // Either worker may answer: both are draining.
      for (let i = 0; i < 4; i++) expect((await send(service.httpPort, 'GET', '/readyz')).status).toBe(503);
      expect(await exited).toBe(0);
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);
      expect(service.logs.filter((line) => String(line.msg).startsWith('draining:'))).toHaveLength(2);
      expect(service.logs.filter((line) => line.msg === 'stopped')).toHaveLength(2);
    } finally {
      await redis.stop();
    }
  }, 20_000);
});

describe('shutdown flags', () => {
  it('a bad --drain-delay or TOLLGATE_SHUTDOWN_TIMEOUT exits 2 at once, naming the flag and the variable', () => {
    const run = (args: string[], env: Record<string, string> = {}) =>
      spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 5_000 });
    const delay = run(['--drain-delay', '5']);
    expect(delay.status).toBe(2);
    expect(delay.stderr).toContain('--drain-delay (or TOLLGATE_DRAIN_DELAY) 5 has no unit: write it with one, "5s" for seconds or "5ms" for milliseconds');
    const timeout = run([], { TOLLGATE_SHUTDOWN_TIMEOUT: '0' });
    expect(timeout.status).toBe(2);
    expect(timeout.stderr).toContain('--shutdown-timeout (or TOLLGATE_SHUTDOWN_TIMEOUT) must be a duration from 1 ms to 600000 ms, got "0"');
    const url = run(['--redis', 'localhost:6379']);
    expect(url.status).toBe(2);
  });
});
