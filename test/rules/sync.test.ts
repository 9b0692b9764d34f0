/**
 * Rules pushed through Redis: three node processes share one Redis; a push on one is enforced by
 * all three within 1 s; a broken push is refused everywhere and changes nothing; a node that
 * starts later, or misses a notice, catches up.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RulesError, RulesHolder } from '../../src/index.js';
import { RulesSync } from '../../src/rules/sync.js';
import { startRedis, type RedisServer } from '../support/redis.js';

const NODE = new URL('../support/rules-node.mjs', import.meta.url).pathname;
const rulesWith = (limit: number) => `domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: ${limit} }\n`;

interface Node {
  readonly child: ChildProcessWithoutNullStreams;
  readonly events: Record<string, unknown>[];
  push(yaml: string): void;
}

let server: RedisServer;
const nodes: Node[] = [];

function startNode(url: string): Promise<Node> {
  const child = spawn(process.execPath, [NODE, url]);
  const events: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => events.push(JSON.parse(line) as Record<string, unknown>));
  const node = { child, events, push: (yaml: string) => child.stdin.write(`${Buffer.from(yaml).toString('base64')}\n`) };
  nodes.push(node);
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (events.some((event) => 'started' in event)) {
        clearInterval(timer);
        resolve(node);
      }
    }, 10);
    child.once('exit', (code) => reject(new Error(`node exited with ${code}`)));
  });
}

/** The last limit each node reported. */
const limits = () => nodes.map((node) => [...node.events].reverse().find((event) => 'limit' in event)?.limit);

beforeAll(async () => {
  server = await startRedis();
}, 30_000);

afterAll(async () => {
  for (const node of nodes) node.child.stdin.end();
  await Promise.all(nodes.map((node) => new Promise((resolve) => (node.child.exitCode !== null ? resolve(null) : node.child.once('exit', resolve)))));
  await server?.stop();
});

describe('rules pushed through Redis', () => {
  it('three processes: a push on one is enforced by all three within 1 s; a broken push changes nothing', async () => {
    await Promise.all([startNode(server.url), startNode(server.url), startNode(server.url)]);
    expect(limits()).toEqual([null, null, null]);

    const pushedAt = Date.now();
    nodes[0]!.push(rulesWith(42));
    await expect.poll(limits, { timeout: 1_000, interval: 10 }).toEqual([42, 42, 42]);
    for (const node of nodes) {
      const applied = node.events.find((event) => event.limit === 42)!;
      expect(Number(applied.at) - pushedAt).toBeLessThan(1_000);
    }

    // A broken push is refused at the source and nothing is stored.
    nodes[1]!.push(rulesWith(42).replace('minute', 'fortnight'));
    await expect.poll(() => nodes[1]!.events.some((event) => 'publishRefused' in event), { timeout: 2_000 }).toBe(true);
    expect(String(nodes[1]!.events.find((event) => 'publishRefused' in event)!.publishRefused)).toMatch(/stdin:4:\d+: .*unit/);

    // Broken rules written straight into Redis (bypassing validation) are refused by every node.
    const admin = new Redis(server.url);
    await admin.hset('tollgate:{rules}:domains', 'api', 'domain: api\ndescriptors: [{ key: user, rate_limit: { unit: minute } }]\n');
    await admin.incr('tollgate:{rules}:version');
    await admin.publish('tollgate:rules', 'x');
    await expect.poll(() => nodes.every((node) => node.events.some((event) => 'refused' in event)), { timeout: 2_000 }).toBe(true);
    expect(limits()).toEqual([42, 42, 42]);

    // A good push after that is applied everywhere again.
    nodes[2]!.push(rulesWith(7));
    await expect.poll(limits, { timeout: 1_000, interval: 10 }).toEqual([7, 7, 7]);
    admin.disconnect();
  }, 30_000);

  it('a node that starts later loads the current version; a missed notice is caught up by the poll', async () => {
    const redis = new Redis(server.url);
    const holder = new RulesHolder();
    const sync = new RulesSync({ redis, holder, pollIntervalMs: 100 });
    try {
      const { version } = await sync.publish(rulesWith(11));
      const lateHolder = new RulesHolder();
      const late = new RulesSync({ redis, holder: lateHolder, pollIntervalMs: 100 });
      await late.start();
      expect(late.status().version).toBe(version);
      expect(lateHolder.current.domainNames()).toEqual(['api']);
      // Change the rules without a notice: the periodic check picks it up.
      await redis.hset('tollgate:{rules}:domains', 'api', rulesWith(12));
      await redis.incr('tollgate:{rules}:version');
      await expect.poll(() => late.status().version, { timeout: 1_000 }).toBe(version + 1);
      await late.close();
    } finally {
      await sync.close();
      redis.disconnect();
    }
  });

  it('publish validates first: an invalid push rejects with a RulesError and stores nothing', async () => {
    const redis = new Redis(server.url);
    const sync = new RulesSync({ redis, holder: new RulesHolder() });
    try {
      const before = await redis.get('tollgate:{rules}:version');
      await expect(sync.publish('domain: api\ndescriptors:\n  - key: ""\n')).rejects.toBeInstanceOf(RulesError);
      expect(await redis.get('tollgate:{rules}:version')).toBe(before);
    } finally {
      await sync.close();
      redis.disconnect();
    }
  });
});
