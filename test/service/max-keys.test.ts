/**
 * `--max-keys`: the memory store's bound reaches the store through the real CLI (env variable),
 * a full store evicts its least recently used key (whose count then starts afresh), and bad values
 * or a Redis store are refused (exit code 2 through the CLI).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveGatewayOptions } from '../../src/gateway/options.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startServiceProcess, type ServiceProcess } from '../support/service.js';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;
const LOGINS_PER_MINUTE = 5;

/** One login check for `user` (examples/rules/classic.yaml: 5 a minute per user); its remaining count. */
async function login(service: ServiceProcess, user: string): Promise<number> {
  const response = await fetch(service.url('/json'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ domain: 'classic', descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', value: user }] }] }),
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { statuses: { limitRemaining?: number }[] };
  return body.statuses[0]!.limitRemaining ?? 0;
}

function gauge(metrics: string, name: string): number {
  const line = metrics.split('\n').find((text) => text.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

describe('tollgate serve --max-keys', () => {
  it('bounds the memory store (TOLLGATE_MAX_KEYS): 150 keys into 100 evict the 50 least recent, which count afresh', async () => {
    const service = await startServiceProcess(['--config', 'examples/rules'], { TOLLGATE_MAX_KEYS: '100' });
    try {
      for (let i = 0; i < 150; i += 10) {
        await Promise.all(Array.from({ length: 10 }, (_, j) => login(service, `user-${i + j}`)));
      }
      const metrics = await (await fetch(service.admin('/metrics'))).text();
      expect(gauge(metrics, 'tollgate_memory_store_max_keys')).toBe(100);
      expect(gauge(metrics, 'tollgate_memory_store_keys')).toBe(100);
      expect(gauge(metrics, 'tollgate_memory_store_evictions_total')).toBe(50);
      // The newest key kept its one use; the oldest was evicted, so its count starts again.
      expect(await login(service, 'user-149')).toBe(LOGINS_PER_MINUTE - 2);
      expect(await login(service, 'user-0')).toBe(LOGINS_PER_MINUTE - 1);
    } finally {
      expect(await service.stop()).toBe(0);
    }
  }, 30_000);

  it('refuses a bad value through the CLI with exit code 2 and a clear message', () => {
    const result = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--max-keys', '1.5k'], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--max-keys (or TOLLGATE_MAX_KEYS) must be a whole number of keys from 1 to 1073741824, got "1.5k"');
  }, 15_000);

  it('takes the flag, the settings file and the memory store range; refuses it with Redis; the gateway passes it on', () => {
    expect(resolveServiceOptions({}, {}).maxKeys).toBe(1_000_000);
    expect(resolveServiceOptions({ 'max-keys': '100000' }, { TOLLGATE_MAX_KEYS: '5' }).maxKeys).toBe(100_000);
    const settings = join(mkdtempSync(join(tmpdir(), 'tollgate-max-keys-')), 'settings.yaml');
    writeFileSync(settings, 'max-keys: 250000\n');
    expect(resolveServiceOptions({ settings }, {}).maxKeys).toBe(250_000);
    expect(resolveServiceOptions({ 'max-keys': String(2 ** 30) }, {}).maxKeys).toBe(2 ** 30);
    for (const bad of ['0', String(2 ** 30 + 1), '-5', '1e6', 'lots']) {
      expect(() => resolveServiceOptions({ 'max-keys': bad }, {})).toThrow(`must be a whole number of keys from 1 to 1073741824, got ${JSON.stringify(bad)}`);
    }
    expect(() => resolveServiceOptions({ 'max-keys': '1000', redis: 'redis://127.0.0.1:6379' }, {})).toThrow("bounds the memory store only; with a Redis store, bound memory with Redis's maxmemory");
    const gateway = resolveGatewayOptions({ config: 'test/gateway/fixtures/minimal.yaml', 'max-keys': '1000' }, {});
    expect(gateway.service.maxKeys).toBe(1_000);
  });
});
