/**
 * Overrides shared through one real Redis by two `tollgate serve` processes (real child processes,
 * as deployed): a PUT on node A is in force on node B within 1 s (measured), node B killed and
 * started again loads it, and a Redis restarted without its data gets it back from the nodes
 * holding it. The in-process version (overrides-redis.test.ts) covers deletes and expiry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const TOKEN = 'overrides-processes-admin-token-0123456789';
const RULES = 'test/service/fixtures/overrides-rules.yaml';
const OVERRIDE = 'domain: api\ndescriptors:\n  - key: user\n    value: acme\n    rate_limit: { unit: minute, requests_per_unit: 1000 }\n';

const redis = useRedisServer();
const nodes: ServiceProcess[] = [];

function startNode(): Promise<ServiceProcess> {
  return startServiceProcess(['--host', '127.0.0.1', '--admin-token', TOKEN, '--config', RULES, '--redis', redis.url]);
}

/** The limit node `node` enforces for user `acme` (a real check over HTTP). */
async function limitOn(node: ServiceProcess): Promise<number | undefined> {
  const response = await fetch(node.url('/v1/check'), { method: 'POST', body: JSON.stringify({ domain: 'api', descriptors: [{ user: 'acme' }] }) });
  const body = (await response.json()) as { statuses: { currentLimit?: { requestsPerUnit: number } }[] };
  return body.statuses[0]!.currentLimit?.requestsPerUnit;
}

beforeAll(async () => {
  nodes.push(...(await Promise.all([startNode(), startNode()])));
}, 60_000);
afterAll(async () => {
  await Promise.all(nodes.map((node) => node.stop()));
});

describe('overrides across two tollgate serve processes on one Redis', () => {
  it('a PUT on node A is in force on node B within 1 s', async () => {
    expect(await limitOn(nodes[1]!)).toBe(2);
    const sentAt = performance.now();
    const response = await fetch(nodes[0]!.admin('/v1/overrides'), { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: OVERRIDE });
    expect(response.status).toBe(200);
    // From the answer: node A has stored it then; what follows is the way to node B.
    const answeredAt = performance.now();
    await expect.poll(() => limitOn(nodes[1]!), { timeout: 1_000, interval: 5 }).toBe(1000);
    const inForceAt = performance.now();
    console.log(`two processes: PUT answered by node A in ${(answeredAt - sentAt).toFixed(1)} ms; in force on node B ${(inForceAt - answeredAt).toFixed(1)} ms after that (${(inForceAt - sentAt).toFixed(1)} ms after it was sent)`);
    expect(inForceAt - answeredAt).toBeLessThan(1_000);
  }, 30_000);

  it('node B killed and started again loads the override from Redis', async () => {
    nodes[1]!.child.kill('SIGKILL');
    await nodes[1]!.stop();
    nodes[1] = await startNode();
    expect(await limitOn(nodes[1])).toBe(1000);
  }, 60_000);

  it('a Redis restarted without its data gets the override back from the nodes holding it', async () => {
    redis.cli('SET', 'marker:before-the-restart', '1');
    await redis.restart();
    // The data is gone (the nodes, separate processes, may store the override again at once).
    expect(redis.cli('EXISTS', 'marker:before-the-restart').trim()).toBe('0');
    await expect.poll(() => redis.cli('HLEN', 'tollgate:{overrides}:entries').trim(), { timeout: 5_000, interval: 50 }).toBe('1');
    // Both nodes still enforce it, and a node started after the loss loads the restored copy.
    expect([await limitOn(nodes[0]!), await limitOn(nodes[1]!)]).toEqual([1000, 1000]);
    await nodes[0]!.stop();
    nodes[0] = await startNode();
    expect(await limitOn(nodes[0])).toBe(1000);
  }, 60_000);
});
