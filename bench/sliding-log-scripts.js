// Redis time per call of the batch script (decide.lua) deciding one sliding-log request, two
// versions of the scripts side by side (by git revision): the LIST read whole on every call (before
// issue 31) against the LIST read at its ends. Logs of 100, 10,000 and 50,000 entries at distinct
// milliseconds; 200 calls each of: a unit-cost denial of a full log, and an admitted call (the log
// 200 short of full, or empty at limit 100, so the calls fill it). `INFO commandstats` µs per EVALSHA on a private
// redis-server (one decision per call: the script's fixed cost is in every figure).
//
//   node bench/sliding-log-scripts.js --before 82d1ad3 [--after HEAD] [--limits 100,10000,50000]
import { execFileSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopChild } from './support/children.js';
import { redisCli, removeRedisDirs, startRedisServer } from './support/redis.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);
const REVISIONS = { before: option('before', ''), after: option('after', 'HEAD') };
if (REVISIONS.before === '') throw new Error('give --before <git revision of the scripts to compare against>');
const LIMITS = option('limits', '100,10000,50000').split(',').map(Number);
const FILES = ['prelude.lua', 'layout.lua', 'wide-level.lua', 'level.lua', 'gcra.lua', 'fixed-window.lua', 'sliding-window.lua', 'sliding-window-buckets.lua', 'sliding-log.lua', 'codes.lua', 'shared-keys.lua', 'penalty.lua', 'decide.lua'];
const CALLS = 200;

/** decide.lua as src/store/redis/lua.ts composes it, from the files at `revision`. */
const compose = (revision) =>
  FILES.map((file) => `-- ==== ${file} ====\n${execFileSync('git', ['-C', ROOT, 'show', `${revision}:src/store/redis/scripts/${file}`], { encoding: 'utf8' })}`).join('\n');

const server = await startRedisServer('sliding-log-scripts');
const cli = (...args) => redisCli(server.port, ...args).trim();
const shas = Object.fromEntries(Object.entries(REVISIONS).map(([side, revision]) => [side, cli('SCRIPT', 'LOAD', compose(revision))]));
const now = Date.now();
console.log(`| limit | scripts | call | Redis µs per call |\n| --- | --- | --- | --- |`);
for (const limit of LIMITS) {
  const step = Math.floor(1_700_000 / limit);
  const entries = Array.from({ length: limit }, (_, i) => `${now - 1_800_000 + i * step} ${i + 1} 1`);
  for (const [side, sha] of Object.entries(shas)) {
    for (const full of [true, false]) {
      const key = `{log:${limit}:${side}:${full}}`;
      // Admitted: as many calls as the log has room for (all of it at limit 100).
      const calls = full ? CALLS : Math.min(CALLS, limit);
      const count = limit - (full ? 0 : calls);
      for (let i = 0; i < count; i += 5_000) cli('RPUSH', key, ...entries.slice(i, Math.min(i + 5_000, count)));
      cli('CONFIG', 'RESETSTAT');
      // now, one policy (sliding-log, 1 h, limit), one group of one consume of cost 1.
      for (let call = 0; call < calls; call++) {
        cli('EVALSHA', sha, '1', key, String(now + call), '1', '4', '3600000', String(limit), String(limit), String(limit), '0', '0', '1', '0', '1', '1', '1', '1', '1');
      }
      const [, made, usec] = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(cli('INFO', 'commandstats'));
      console.log(`| ${limit} | ${side} (${REVISIONS[side]}) | ${full ? 'denied, log full' : `admitted, log filling from ${count}`} | ${(Number(usec) / Number(made)).toFixed(1)} |`);
    }
  }
}
await stopChild(server.child);
removeRedisDirs();
