/**
 * `tollgate serve --memcached HOST:PORT[,…]`: two service processes on one real memcached share
 * their counters, /readyz follows memcached going away and coming back, and bad values are refused
 * (exit code 2 through the CLI, as every invalid flag).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/errors.js';
import { loadRules } from '../../src/rules/load.js';
import { RulesHolder } from '../../src/rules/ruleset.js';
import type { RateLimitConfig } from '../../src/rules/types.js';
import { watchRules } from '../../src/rules/watch.js';
import { memcachedRefusal } from '../../src/store/memcached/store.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { useMemcached } from '../support/memcached.js';
import { startServiceProcess, type ServiceProcess } from '../support/service.js';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;

/** One `action` check for `user` (examples/memcached/classic.yaml); the response. */
function check(service: ServiceProcess, action: string, user: string): Promise<Response> {
  return fetch(service.url('/json'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ domain: 'classic', descriptors: [{ entries: [{ key: 'action', value: action }, { key: 'user', value: user }] }] }),
  });
}

/** One post by `user` (classic.yaml: 300 per 3 hours per user, a sliding window); its remaining count. */
async function post(service: ServiceProcess, user: string): Promise<number> {
  const response = await check(service, 'post', user);
  expect(response.status).toBe(200);
  const body = (await response.json()) as { statuses: { limitRemaining?: number }[] };
  return body.statuses[0]!.limitRemaining ?? 0;
}

/** Until /readyz answers `status` (bounded: 10 s); its body. */
async function readyz(service: ServiceProcess, status: number): Promise<Record<string, unknown>> {
  const until = Date.now() + 10_000;
  for (;;) {
    const response = await fetch(service.admin('/readyz'));
    const body = (await response.json()) as Record<string, unknown>;
    if (response.status === status) return body;
    if (Date.now() > until) throw new Error(`/readyz stayed ${response.status}: ${JSON.stringify(body)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('tollgate serve --memcached', () => {
  const server = useMemcached();

  it("two service processes on one memcached share their counters (a user's 300 posts per 3 hours, counted across both) and a login penalty", async () => {
    // What is checked is memcached's answers: a generous deadline and no failure mode keep a loaded machine from answering locally.
    const patient = ['--deadline-ms', '5000', '--failure-mode', 'closed'];
    const [a, b] = await Promise.all([
      startServiceProcess(['--config', 'examples/memcached', '--memcached', server().address, ...patient]),
      startServiceProcess(['--config', 'examples/memcached', ...patient], { TOLLGATE_MEMCACHED: server().address }),
    ]);
    try {
      const user = `user-${Math.random().toString(36).slice(2)}`;
      expect(await post(a, user)).toBe(299);
      expect(await post(b, user)).toBe(298);
      expect(await post(a, user)).toBe(297);
      // 5 logins a minute, then a 5-minute block: started on one node, honoured by the other.
      const logins = [];
      for (let i = 0; i < 7; i++) logins.push(await check(i % 2 === 0 ? a : b, 'login', user));
      expect(logins.map((response) => response.status)).toEqual([200, 200, 200, 200, 200, 429, 429]);
      expect(logins.slice(5).map((response) => response.headers.has('tollgate-blocked'))).toEqual([true, true]);
      expect(await readyz(a, 200)).toMatchObject({ store: 'memcached', connected: 1, servers: 1 });
    } finally {
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
    }
  }, 60_000);

  it('rules memcached cannot keep (examples/rules: a sliding log of logins) stop the start: exit code 2 naming the rule at file:line and the alternative', () => {
    const result = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--admin-port', '0', '--config', 'examples/rules', '--memcached', server().address], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/examples\/rules\/classic\.yaml:16:9: descriptors\[1\]\.descriptors\[0\]\.rate_limit: the memcached store does not support the sliding-log algorithm .*use sliding-window with precision.*or the Redis store.*examples\/memcached\//);
  }, 15_000);

  it('a hot reload bringing a rule memcached cannot keep is refused at its file:line, the last good rules staying in force', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-memcached-rules-'));
    const rules = (algorithm: string): string => `domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5, algorithm: ${algorithm} }\n`;
    writeFileSync(join(dir, 'api.yaml'), rules('sliding-window'));
    const refuse = (limit: RateLimitConfig): string | undefined => memcachedRefusal(limit);
    const holder = new RulesHolder(await loadRules(dir, { refuse }));
    const errors: unknown[] = [];
    const watcher = watchRules(dir, holder, { pollIntervalMs: 60_000, settleMs: 20, refuse, onError: (error) => errors.push(error) });
    try {
      await watcher.reload();
      const version = holder.current.version;
      writeFileSync(join(dir, 'api.yaml'), rules('sliding-log'));
      await watcher.reload();
      expect(holder.current.version).toBe(version);
      expect(String(errors.at(-1))).toMatch(/api\.yaml:3:\d+: descriptors\[0\]\.rate_limit: the memcached store does not support the sliding-log algorithm/);
    } finally {
      watcher.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('/readyz answers 503 while memcached is down and 200 once it is back, without traffic', async () => {
    const service = await startServiceProcess(['--config', 'examples/memcached', '--memcached', server().address]);
    try {
      await readyz(service, 200);
      await server().stop();
      expect(await readyz(service, 503)).toMatchObject({ store: 'memcached', connected: 0 });
      await server().restart();
      expect(await readyz(service, 200)).toMatchObject({ connected: 1 });
    } finally {
      expect(await service.stop()).toBe(0);
    }
  }, 60_000);

  it.each([
    [{ memcached: 'localhost' }, /--memcached \(or TOLLGATE_MEMCACHED\) must be host:port,host:port,\.\.\. with ports 1-65535, got "localhost"/],
    [{ memcached: 'a:1,a:1' }, /names a:1 twice/],
    [{ memcached: 'a:1', redis: 'redis://b:2' }, /give --memcached \(or TOLLGATE_MEMCACHED\) or a Redis store, not both \(also given: --redis\)/],
    [{ memcached: 'a:1', 'max-keys': '10' }, /bounds the memory store only; with memcached/],
  ])('%j is refused with a clear error', (flags, message) => {
    expect(() => resolveServiceOptions(flags, {})).toThrow(InvalidOptionError);
    expect(() => resolveServiceOptions(flags, {})).toThrow(message);
  });

  it('takes several servers, from the flag or TOLLGATE_MEMCACHED, and --workers above 1 with them', () => {
    expect(resolveServiceOptions({ memcached: 'a:11211, b:11212' }, {}).memcached).toEqual([{ host: 'a', port: 11211 }, { host: 'b', port: 11212 }]);
    expect(resolveServiceOptions({ workers: '2' }, { TOLLGATE_MEMCACHED: 'c:1' })).toMatchObject({ workers: 2, memcached: [{ host: 'c', port: 1 }] });
  });

  it('a bad --memcached through the CLI: exit code 2 and the message on stderr', () => {
    const result = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--memcached', 'cache:notaport'], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--memcached (or TOLLGATE_MEMCACHED) must be host:port,host:port,... with ports 1-65535, got "cache:notaport"');
  }, 15_000);
});
