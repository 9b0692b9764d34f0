// Where a cross-slot call's time goes on one Redis Cluster master (issue 32 item 4): FCALLs of the
// cross-slot library (src/store/redis/cross-slot.ts), each deciding --per-call fixed-window checks
// on keys of that master's slots, sent 20 calls at a time on one connection; then INFO cpu per
// decision, and INFO commandstats usec per decision of the FCALL and of each command the script ran
// (Redis 7 counts a script's own commands there too). Round 0 writes new keys, round 1 the same again.
//
//   npm run build && node bench/redis-cross-slot-commands.js [--per-call 20] [--calls 4000]
//
// Starts a 3-master Cluster on free loopback ports (bench/support/redis.js), killed by PID at the end.
import { createRequire } from 'node:module';
import calculateSlot from 'cluster-key-slot';
import { killAllNow } from './support/children.js';
import { redisCounters, redisDelta, removeRedisDirs, startRedisCluster } from './support/redis.js';
import { compilePolicy } from '../dist/index.js';
import { CROSS_SLOT_LIBRARY, crossSlotArgs } from '../dist/store/redis/cross-slot.js';

const require = createRequire(import.meta.url);
const { Redis } = require('ioredis');
const argv = process.argv.slice(2);
const flag = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const perCall = flag('per-call', 20);
const calls = flag('calls', 4000);

const cluster = await startRedisCluster('cross-slot-commands', 3);
const port = cluster.servers[0].port;
const redis = new Redis(port);
const [from, to] = (await redis.cluster('SLOTS')).find((range) => range[2][1] === port);
const policy = compilePolicy({ algorithm: 'fixed-window', limit: 1_000_000_000, window: 3_600_000 });
const keys = [];
for (let i = 0; keys.length < 30_000; i++) if (calculateSlot(`k${i}`) >= from && calculateSlot(`k${i}`) <= to) keys.push(`k${i}`);
await redis.function('LOAD', 'REPLACE', CROSS_SLOT_LIBRARY.source);
let next = 0;
const batch = () =>
  Array.from({ length: perCall }, () => ({ keys: [`tollgate:{${keys[next++ % keys.length]}}f1h`], policies: [policy], op: 1, costs: [1], resolve() {}, reject() {} }));
for (let round = 0; round < 2; round++) {
  const before = [redisCounters(port)];
  for (let sent = 0; sent < calls; sent += 20) {
    await Promise.all(Array.from({ length: 20 }, () => redis.fcall(CROSS_SLOT_LIBRARY.name, 0, ...crossSlotArgs('', batch(), false))));
  }
  const delta = redisDelta(before, [redisCounters(port)]);
  const per = (value) => (value / (calls * perCall)).toFixed(2);
  const inner = Object.entries(delta.commands).filter(([name]) => !['fcall', 'info'].includes(name));
  console.log(
    `round ${round} (${round === 0 ? 'new keys' : 'existing keys'}), ${perCall} decisions a call: Redis CPU ${per(delta.cpuSeconds * 1e6)} µs/decision; ` +
      `FCALL ${per(delta.commands.fcall.usec)} usec/decision, of which ${inner.map(([name, stat]) => `${name} ${per(stat.usec)} (${per(stat.calls)} a decision)`).join(', ')}`,
  );
}
redis.disconnect();
killAllNow();
removeRedisDirs();
process.exit(0);
