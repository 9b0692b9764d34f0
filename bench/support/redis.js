// Redis servers for benchmarks: redis-server child processes on free loopback ports (no
// persistence, a temp dir each), recorded in children.js so they are killed by PID, nothing else.
// A single server, or a Redis Cluster of N masters built with `redis-cli --cluster create`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, startChild, waitForPort } from './children.js';

/** The temp dirs of the servers started here, removed by removeRedisDirs() once they are stopped. */
const dirs = [];

export function removeRedisDirs() {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function redisCli(port, ...args) {
  return execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });
}

/** Starts one redis-server on a free port; `extra` are more server flags. */
export async function startRedisServer(name, extra = []) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-redis-'));
  dirs.push(dir);
  const child = startChild(name, 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra]);
  await waitForPort(child, port);
  return { name, port, child, url: `redis://127.0.0.1:${port}` };
}

/** Starts `masters` cluster-enabled servers, joins them (no replicas) and waits for cluster_state:ok. */
export async function startRedisCluster(prefix, masters = 3) {
  const servers = [];
  // One after the other: ports picked at the same moment could collide.
  for (let i = 0; i < masters; i++) {
    servers.push(await startRedisServer(`${prefix}-${i}`, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf']));
  }
  execFileSync('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
  for (const server of servers) {
    const deadline = Date.now() + 15_000;
    while (!/cluster_state:ok/.test(redisCli(server.port, 'CLUSTER', 'INFO'))) {
      if (Date.now() > deadline) throw new Error(`cluster not ok on ${server.port}`);
      await sleep(50);
    }
  }
  return { servers, nodes: servers.map((s) => `127.0.0.1:${s.port}`).join(',') };
}

/**
 * What Redis did so far: per command (`INFO commandstats`: calls, usec) and its own CPU seconds
 * (`INFO cpu`: used_cpu_sys + used_cpu_user, main thread and children).
 */
export function redisCounters(port) {
  const commands = {};
  for (const match of redisCli(port, 'INFO', 'commandstats').matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+)/gm)) {
    commands[match[1]] = { calls: Number(match[2]), usec: Number(match[3]) };
  }
  const cpuText = redisCli(port, 'INFO', 'cpu');
  const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpuText)?.[1] ?? 0);
  return { commands, cpuSeconds: field('used_cpu_sys') + field('used_cpu_user') };
}

/** Sum of `after − before` over several servers' counters: calls and usec per command, CPU seconds. */
export function redisDelta(befores, afters) {
  const commands = {};
  let cpuSeconds = 0;
  afters.forEach((after, i) => {
    const before = befores[i];
    cpuSeconds += after.cpuSeconds - before.cpuSeconds;
    for (const [name, { calls, usec }] of Object.entries(after.commands)) {
      const was = before.commands[name] ?? { calls: 0, usec: 0 };
      const sum = (commands[name] ??= { calls: 0, usec: 0 });
      sum.calls += calls - was.calls;
      sum.usec += usec - was.usec;
    }
  });
  return { commands, cpuSeconds };
}
