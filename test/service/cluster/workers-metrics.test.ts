/**
 * `tollgate serve --workers 2` as real processes on a real Redis: whichever worker answers,
 * /metrics and the dashboard's event stream give the sum over the workers; `?by=worker` and the
 * dashboard's worker rows add up to it; a worker killed by PID (the primary starts another) takes
 * nothing away from the counters. A block sent to one worker applies in all, and in a worker started
 * later.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstSnapshot, getFresh, observabilityUrl, sampleSum, scrapeMetrics } from '../../support/observability.js';
import { waitFor } from '../../support/redis.js';
import { useRedisServer } from '../../support/redis-topologies.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

const CHECKS = 'tollgate_checks_total';

const TOKEN = 'workers-admin-token';

/** One request on a connection of its own, so the primary deals them out to both workers. */
function send(url: string, method: string, body: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function check(service: ServiceProcess, user: string): Promise<number> {
  return send(service.url('/v1/check'), 'POST', JSON.stringify({ domain: 'classic', descriptors: [{ action: 'login', user }] }));
}

/** The PIDs of the workers that said they listen, in order. */
function workerPids(service: ServiceProcess): number[] {
  return service.logs.filter((line) => String(line.msg).startsWith('HTTP listening')).map((line) => Number(line.pid));
}

async function checksOnMetrics(service: ServiceProcess): Promise<number> {
  return sampleSum((await scrapeMetrics(service)).samples, CHECKS);
}

describe('tollgate serve --workers 2: metrics and dashboard across workers', () => {
  const redis = useRedisServer();
  let service: ServiceProcess;

  beforeAll(async () => {
    service = await startServiceProcess(['--config', 'examples/rules', '--redis', redis.url, '--workers', '2', '--admin-token', TOKEN]);
    await waitFor(() => workerPids(service).length === 2, 'both workers listening');
  }, 30_000);
  afterAll(async () => {
    await service?.stop();
  });

  it('sums every worker on each scrape, never goes back, and keeps a killed worker’s counts', { timeout: 60_000 }, async () => {
    const sent = 40;
    for (let i = 0; i < sent; i++) expect(await check(service, `u-${i}`)).toBe(200);

    // Several scrapes, each answered by whichever worker: always the sum.
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) seen.push(await checksOnMetrics(service));
    expect(seen).toEqual(new Array(6).fill(sent));

    // The breakdown: one series per worker, adding up to the sum; both workers took checks.
    const byWorker = (await scrapeMetrics(service, '?by=worker')).samples.filter((s) => s.name === CHECKS);
    expect(byWorker.reduce((sum, s) => sum + s.value, 0)).toBe(sent);
    const workers = new Set(byWorker.map((s) => s.labels.worker));
    expect(workers.size).toBe(2);
    for (const s of byWorker) expect(s.value).toBeGreaterThan(0);

    // The dashboard's stream, from whichever worker: the sum, and a row per worker adding up to it.
    const snapshot = await firstSnapshot(service, (s) => (s.totals as { checks: number }).checks === sent);
    const rows = snapshot.workers as { worker: number | string; checks: number }[];
    expect(rows.reduce((sum, row) => sum + row.checks, 0)).toBe(sent);
    expect(rows).toHaveLength(2);

    // Kill one worker: the primary starts another; the sum keeps the dead worker's counts.
    const [victim] = workerPids(service);
    process.kill(victim!, 'SIGKILL');
    await waitFor(() => workerPids(service).length === 3, 'a new worker listening', 15_000);
    for (let i = 0; i < 6; i++) {
      const now = await checksOnMetrics(service);
      expect(now).toBeGreaterThanOrEqual(seen.at(-1)!);
      seen.push(now);
    }
    expect(seen.at(-1)).toBe(sent);
    const after = (await scrapeMetrics(service, '?by=worker')).samples.filter((s) => s.name === CHECKS);
    expect(after.reduce((sum, s) => sum + s.value, 0)).toBe(sent);
    expect(after.some((s) => s.labels.worker === 'exited')).toBe(true);

    // New checks add to it, whichever worker takes them.
    for (let i = 0; i < 10; i++) expect(await check(service, `v-${i}`)).toBe(200);
    expect(await checksOnMetrics(service)).toBe(sent + 10);
    const later = await firstSnapshot(service, (s) => (s.totals as { checks: number }).checks === sent + 10);
    expect((later.workers as { worker: number | string }[]).map((row) => row.worker)).toContain('exited');
  });

  it('applies a block received by one worker in every worker, and in one started later', { timeout: 30_000 }, async () => {
    const admin = { authorization: `Bearer ${TOKEN}` };
    const blockedCheck = (): Promise<number> => send(service.url('/v1/check'), 'POST', JSON.stringify({ domain: 'per_ip', descriptors: [{ remote_address: '203.0.113.99' }] }));
    const eightChecks = async (): Promise<number[]> => {
      const codes: number[] = [];
      for (let i = 0; i < 8; i++) codes.push(await blockedCheck());
      return codes;
    };
    /** Until six answers in a row (the primary deals connections round-robin: every worker) list the block, or none does. */
    const everyWorkerLists = async (listed: boolean): Promise<void> => {
      let inRow = 0;
      const deadline = Date.now() + 5_000;
      while (inRow < 6) {
        if (Date.now() > deadline) throw new Error(`the workers did not all ${listed ? 'list' : 'drop'} the block`);
        const { text } = await getFresh(service, '/v1/keys/blocked', admin);
        inRow = text.includes('203.0.113.99') === listed ? inRow + 1 : 0;
      }
    };
    const blockUrl = observabilityUrl(service, '/v1/keys/block');
    expect(await send(blockUrl, 'POST', JSON.stringify({ key: 'remote_address=203.0.113.99', domain: 'per_ip', ttlMs: 60_000 }), admin)).toBe(200);
    // The block reaches the other worker through the primary: every check is refused, whichever worker takes it.
    await everyWorkerLists(true);
    expect(await eightChecks()).toEqual(new Array(8).fill(429));

    // A worker started in place of a killed one asks the primary for the blocks in force.
    const pids = workerPids(service);
    process.kill(pids.at(-1)!, 'SIGKILL');
    await waitFor(() => workerPids(service).length === pids.length + 1, 'a new worker listening', 15_000);
    await everyWorkerLists(true);
    expect(await eightChecks()).toEqual(new Array(8).fill(429));

    // Lifted on one worker, lifted everywhere.
    expect(await send(`${blockUrl}?key=remote_address%3D203.0.113.99&domain=per_ip`, 'DELETE', '', admin)).toBe(200);
    await everyWorkerLists(false);
    expect(await eightChecks()).toEqual(new Array(8).fill(200));
  });

  it('refuses a breakdown it does not know, with a 400', async () => {
    const response = await fetch(observabilityUrl(service, '/metrics?by=region'));
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toMatch(/by must be "worker"/);
  });
});
