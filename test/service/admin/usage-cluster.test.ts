/**
 * `GET /v1/usage` of a service counting on a 3-master Redis Cluster (`--redis-cluster`): the usage
 * of a calendar month in Europe/Paris and of a minute, as /v1/check counted them, over the
 * period each rule's window gives, spending nothing.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';

const TOKEN = 'usage-cluster-admin-token-0123456789';
const RULES = `domain: plans
descriptors:
  - key: customer
    rate_limit: { name: monthly, unit: month, requests_per_unit: 100000, calendar: true, time_zone: Europe/Paris }
  - key: app
    rate_limit: { unit: minute, requests_per_unit: 1000 }
`;

const redis = useRedisTopologies();
let service: RunningService;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-usage-cluster-'));
  writeFileSync(join(dir, 'plans.yaml'), RULES);
  const cluster = redis.cluster.nodes.map((node) => `${node.host}:${node.port}`).join(',');
  service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'admin-token': TOKEN, 'redis-cluster': cluster }, {}), undefined, { grpc: false });
}, 60_000);
afterAll(async () => service?.close());

interface UsageRow {
  readonly descriptor: string;
  readonly rule: string | null;
  readonly used: number;
  readonly limit: number;
  readonly periodStart: number;
  readonly periodEnd: number;
}

async function usageOf(query: string): Promise<UsageRow[]> {
  const response = await fetch(`http://127.0.0.1:${service.adminPort}/v1/usage?${query}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { usage: UsageRow[] }).usage;
}

/** `ms` on the wall clock of Europe/Paris: day, hour, minute, second. */
function parisClock(ms: number): string {
  return new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(ms);
}

describe('GET /v1/usage on a Redis Cluster', () => {
  it('a calendar month in Europe/Paris and a minute: used as /v1/check counted, over each period, spending nothing', async () => {
    // Keys that land in several slots of the Cluster (a key's slot follows its name).
    const customers = ['acme', 'globex', 'initech', 'umbrella'];
    for (const [index, customer] of customers.entries()) {
      for (let i = 0; i <= index; i++) {
        const response = await fetch(`http://127.0.0.1:${service.httpPort!}/v1/check`, { method: 'POST', body: JSON.stringify({ domain: 'plans', descriptors: [{ customer }, { app: customer }] }) });
        expect(response.status).toBe(200);
      }
    }
    const query = `domain=plans&${customers.map((customer) => `descriptor=customer=${customer}&descriptor=app=${customer}`).join('&')}`;
    const now = Date.now();
    const [first, again] = [await usageOf(query), await usageOf(query)];
    expect(again.map((row) => row.used)).toEqual(first.map((row) => row.used));
    for (const [index, customer] of customers.entries()) {
      const month = first.find((row) => row.descriptor === `customer=${customer}`)!;
      expect(month).toMatchObject({ rule: 'plans.customer', used: index + 1, limit: 100000 });
      // The month in Paris: from the 1st at 00:00 there to the next 1st at 00:00, now inside.
      expect([parisClock(month.periodStart), parisClock(month.periodEnd)]).toEqual(['1, 00:00:00', '1, 00:00:00']);
      expect(month.periodStart).toBeLessThanOrEqual(now);
      expect(month.periodEnd).toBeGreaterThan(now);
      expect((month.periodEnd - month.periodStart) / 86_400_000).toBeGreaterThanOrEqual(28 - 1 / 24);
      expect((month.periodEnd - month.periodStart) / 86_400_000).toBeLessThanOrEqual(31 + 1 / 24);
      const minute = first.find((row) => row.descriptor === `app=${customer}`)!;
      expect(minute).toMatchObject({ rule: 'plans.app', limit: 1000 });
      expect(minute.periodEnd - minute.periodStart).toBe(60_000);
      expect(minute.periodStart % 60_000).toBe(0);
      // The minute may have turned between the checks and the read: its count is then lower.
      expect(minute.used).toBeLessThanOrEqual(index + 1);
    }
  }, 60_000);
});
