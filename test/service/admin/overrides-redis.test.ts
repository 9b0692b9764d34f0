/**
 * Overrides shared through one real Redis by two in-process services: a put on one is in force on
 * the other within 1 s (measured), a node restarted loads them, a Redis restarted without its data
 * gets them back from the nodes holding them, and a delete on one is gone on the other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const TOKEN = 'overrides-redis-admin-token-0123456789';
const RULES = 'test/service/fixtures/overrides-rules.yaml';
const OVERRIDE = JSON.stringify({ domain: 'api', descriptors: [{ key: 'user', value: 'acme', rate_limit: { unit: 'minute', requests_per_unit: 1000 } }] });

const redis = useRedisServer();
const nodes: RunningService[] = [];

function startNode(): Promise<RunningService> {
  const flags = { port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', 'log-level': 'silent', 'drain-delay': '0', 'admin-token': TOKEN, config: RULES, redis: redis.url };
  return startService(resolveServiceOptions(flags, {}), undefined, { grpc: false });
}

/** The limit a check of user `acme` meets on `node`. */
async function limitOn(node: RunningService): Promise<number | undefined> {
  const result = await node.context.limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'acme' }] }] }, { spend: false });
  return result.statuses[0]!.currentLimit?.requestsPerUnit;
}

function admin(node: RunningService, method: string, path: string, body?: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${node.adminPort}${path}`, { method, headers: { authorization: `Bearer ${TOKEN}` }, ...(body !== undefined ? { body } : {}) });
}

beforeAll(async () => {
  nodes.push(await startNode(), await startNode());
}, 20_000);
afterAll(async () => {
  await Promise.all(nodes.map((node) => node.close()));
});

describe('overrides through Redis, two nodes', () => {
  it('an override put on one node is in force on the other within 1 s', async () => {
    expect(await limitOn(nodes[1]!)).toBe(2);
    const putAt = performance.now();
    const response = await admin(nodes[0]!, 'PUT', '/v1/overrides', OVERRIDE);
    expect(response.status).toBe(200);
    const answeredMs = performance.now() - putAt;
    await expect.poll(() => limitOn(nodes[1]!), { timeout: 1_000, interval: 5 }).toBe(1000);
    const elapsedMs = performance.now() - putAt;
    console.log(`PUT answered in ${answeredMs.toFixed(1)} ms; in force on the other node ${elapsedMs.toFixed(1)} ms after it was sent`);
    expect(elapsedMs).toBeLessThan(1_000);
    const listed = (await (await admin(nodes[1]!, 'GET', '/v1/overrides')).json()) as { overrides: { id: string; shadows: string }[] };
    expect(listed.overrides).toMatchObject([{ id: 'api|user=acme', shadows: 'api.user', expires: null }]);
  });

  it('a node restarted loads the overrides from Redis', async () => {
    await nodes[1]!.close();
    nodes[1] = await startNode();
    expect(await limitOn(nodes[1])).toBe(1000);
  });

  it('a Redis restarted without its data gets the overrides back from the nodes holding them', async () => {
    await redis.restart();
    expect((await redis.cli('HLEN', 'tollgate:{overrides}:entries')).trim()).toBe('0');
    await expect.poll(async () => (await redis.cli('HLEN', 'tollgate:{overrides}:entries')).trim(), { timeout: 5_000, interval: 50 }).toBe('1');
    // A node started after the loss gets them from Redis, restored.
    await nodes[0]!.close();
    nodes[0] = await startNode();
    expect(await limitOn(nodes[0])).toBe(1000);
  }, 15_000);

  it('a delete on one node is gone on the other within 1 s', async () => {
    const response = await admin(nodes[1]!, 'DELETE', '/v1/overrides?domain=api&entry=user=acme');
    expect(response.status).toBe(200);
    expect((await admin(nodes[1]!, 'DELETE', '/v1/overrides?domain=api&entry=user=nobody')).status).toBe(404);
    await expect.poll(() => limitOn(nodes[0]!), { timeout: 1_000, interval: 5 }).toBe(2);
    expect((await redis.cli('HLEN', 'tollgate:{overrides}:entries')).trim()).toBe('0');
  });

  it('an override expires on every node at its time, and is deleted from Redis', async () => {
    const expiring = JSON.stringify({ ...JSON.parse(OVERRIDE), expires: '400ms' });
    const putAt = Date.now();
    expect((await admin(nodes[0]!, 'PUT', '/v1/overrides', expiring)).status).toBe(200);
    await expect.poll(() => limitOn(nodes[1]!), { timeout: 1_000, interval: 5 }).toBe(1000);
    await expect.poll(() => limitOn(nodes[1]!), { timeout: 1_000, interval: 5 }).toBe(2);
    expect(Date.now() - putAt).toBeGreaterThanOrEqual(400);
    expect(await limitOn(nodes[0]!)).toBe(2);
    await expect.poll(async () => (await redis.cli('HLEN', 'tollgate:{overrides}:entries')).trim(), { timeout: 2_000, interval: 50 }).toBe('0');
  });

  it('all=true deletes every override of the domain on every node', async () => {
    const two = JSON.stringify(['acme', 'beta'].map((user) => ({ domain: 'api', descriptors: [{ key: 'user', value: user, rate_limit: { unit: 'minute', requests_per_unit: 1000 } }] })));
    expect((await admin(nodes[0]!, 'PUT', '/v1/overrides', two)).status).toBe(200);
    expect((await (await admin(nodes[1]!, 'DELETE', '/v1/overrides?domain=api&all=true')).json()) as unknown).toMatchObject({ deleted: 2 });
    await expect.poll(() => limitOn(nodes[0]!), { timeout: 1_000, interval: 5 }).toBe(2);
    expect((await redis.cli('HLEN', 'tollgate:{overrides}:entries')).trim()).toBe('0');
  });

  it('a broken stored override is skipped and named by every node; the others apply', async () => {
    expect((await admin(nodes[0]!, 'PUT', '/v1/overrides', OVERRIDE)).status).toBe(200);
    await redis.cli('HSET', 'tollgate:{overrides}:entries', 'api|user=broken', 'not json');
    const skipped = async (node: RunningService) => ((await (await admin(node, 'GET', '/v1/rules')).json()) as { overrides: { skipped: { domain: string; error: string }[] } }).overrides.skipped;
    await expect.poll(() => skipped(nodes[1]!), { timeout: 2_000, interval: 20 }).toEqual([{ domain: 'api|user=broken', error: expect.stringMatching(/the stored override is not JSON; put it again/) }]);
    expect(await limitOn(nodes[1]!)).toBe(1000);
    await admin(nodes[0]!, 'DELETE', '/v1/overrides?domain=api&all=true');
  });
});
