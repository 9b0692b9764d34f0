// One Tollgate node for the rules push tests, as its own OS process: it follows the rules pushed
// through Redis and, whenever a version goes into force, prints the limit it now enforces for
// { user: u } as a JSON line. A line on stdin is base64 YAML to push from this node.
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { createLimiter, memoryStore } from '../../dist/index.js';
import { RulesHolder, RulesSync } from '../../dist/rules/index.js';

const [url] = process.argv.slice(2);
const redis = new Redis(url);
const holder = new RulesHolder();
const limiter = createLimiter({ store: memoryStore(), rules: holder });
const report = async (event) => {
  const result = await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }] });
  process.stdout.write(`${JSON.stringify({ ...event, limit: result.statuses[0].currentLimit?.requestsPerUnit ?? null, at: Date.now() })}\n`);
};
const sync = new RulesSync({
  redis,
  holder,
  pollIntervalMs: 200,
  onApply: (version) => void report({ applied: version }),
  onError: (error) => void report({ refused: error.message }),
});
await sync.start();
await report({ started: sync.status().version });
createInterface({ input: process.stdin }).on('line', (line) => {
  sync.publish(Buffer.from(line, 'base64').toString('utf8'), 'stdin').then(
    ({ version }) => report({ published: version }),
    (error) => report({ publishRefused: error.message }),
  );
});
process.stdin.on('end', async () => {
  await sync.close();
  redis.disconnect();
});
