/**
 * Issue 27, item 2: compiled policies could be exhausted by anyone. Each new (algorithm, window)
 * named at `POST /v1/limit` took a number from a process-wide table of 65,536 that was never freed:
 * after 65,600 such requests (18 s) every `PUT /v1/rules` with a new window was a 400 until restart.
 * Nothing is numbered process-wide now: the memory store numbers the states it holds keys of and
 * frees a number with its state's last key (src/store/state-spaces.ts), so the numbers in use never
 * pass the keys held (`--max-keys`), and no window a request names can refuse the operator's rules.
 *
 * The flood is 70,000 distinct windows at one running service, past the old 65,536. Over HTTP each
 * `/v1/limit` costs the service ~0.15 ms of CPU (10,000 took 7.8 s on a busy 2-core machine; in this
 * process, with the client's share, 5,000 took 9.6 s), so 1,000 go over HTTP and the other 69,000
 * through the service's own limiter, as `/v1/limit` decides them (`compilePolicy`, then
 * `limiter.limit`, 65,000 in 2.2 s); the edges (rules, decisions, metrics) are HTTP.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, memoryStore, type Policy } from '../../src/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { metricValue } from '../support/load.js';

const TOKEN = 'policy-table-admin-token-0123456789';
const NOW = 1_700_000_000_000;
const MAX_KEYS = 20_000;
const FLOOD = 70_000;
const OVER_HTTP = 1_000;
/** Windows no rule uses: 1,000,001 ms and up. */
const floodWindow = (i: number): number => 1_000_001 + i;
const RULES = ['domain: steady', 'descriptors:', '  - key: user', '    rate_limit: { unit: hour, requests_per_unit: 5, algorithm: fixed-window }', ''].join('\n');
const PUSHED = ['domain: pushed', 'descriptors:', '  - key: user', '    rate_limit: { unit: minute, unit_multiplier: 7, requests_per_unit: 3 }', ''].join('\n');

describe('a flood of 70,000 distinct windows at POST /v1/limit', () => {
  let service: RunningService;
  let pool: Pool;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-policy-table-'));
    writeFileSync(join(dir, 'steady.yaml'), RULES);
    const flags = { port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', config: dir, 'admin-token': TOKEN, 'max-keys': String(MAX_KEYS) };
    // A fixed clock: the rules' hourly window cannot roll over while the test runs.
    service = await startService(resolveServiceOptions(flags, {}), pino({ level: 'silent' }), { clock: () => NOW });
    pool = new Pool(`http://127.0.0.1:${service.httpPort}`, { connections: 4, pipelining: 16 });
  });
  afterAll(async () => {
    await pool?.close();
    await service?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
    const response = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.statusCode, body: (await response.body.json()) as Record<string, unknown> };
  };
  const limit = async (key: string, window: number): Promise<unknown> => (await post('/v1/limit', { key, policy: { algorithm: 'fixed-window', limit: 5, window } })).body.remaining;
  const check = async (domain: string, user: string): Promise<[number, unknown]> => {
    const { status, body } = await post('/v1/check', { domain, descriptors: [{ user }] });
    return [status, (body.statuses as { limitRemaining?: number }[])[0]!.limitRemaining ?? 0];
  };

  it('leaves the rules their windows: a push with new windows loads and decides exactly; the store holds at most --max-keys states', async () => {
    // Before: a rule's key and a request's key, part spent.
    expect([await check('steady', 'alice'), await check('steady', 'alice'), await check('steady', 'alice')]).toEqual([[200, 4], [200, 3], [200, 2]]);
    expect([await limit('returner', 777_777), await limit('returner', 777_777)]).toEqual([4, 3]);

    const statuses = new Map<number, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < OVER_HTTP) {
          const { status } = await post('/v1/limit', { key: 'flood', policy: { algorithm: 'fixed-window', limit: 5, window: floodWindow(next++) } });
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      }),
    );
    expect(Object.fromEntries(statuses)).toEqual({ 200: OVER_HTTP });
    const limiter = service.context.limiter;
    for (let i = OVER_HTTP; i < FLOOD; i++) {
      const decision = await limiter.limit('flood', compilePolicy({ algorithm: 'fixed-window', limit: 5, window: floodWindow(i) }));
      if (!decision.allowed) throw new Error(`window ${floodWindow(i)} was denied`);
    }

    // Bounded: the states held number at most the keys held, at most --max-keys.
    const metrics = await (await fetch(`http://127.0.0.1:${service.adminPort}/metrics`)).text();
    const spaces = metricValue(metrics, 'tollgate_memory_store_state_spaces')!;
    const keys = metricValue(metrics, 'tollgate_memory_store_keys')!;
    expect(metricValue(metrics, 'tollgate_memory_store_max_keys')).toBe(MAX_KEYS);
    expect(keys).toBe(MAX_KEYS);
    expect(spaces).toBeGreaterThan(0);
    expect(spaces).toBeLessThanOrEqual(keys);

    // The rule's key kept its count (a policy in use is never dropped for others' windows).
    expect(await check('steady', 'alice')).toEqual([200, 1]);

    // The operator's push with windows never seen loads, and decides exactly.
    const push = await fetch(`http://127.0.0.1:${service.adminPort}/v1/rules`, { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: PUSHED });
    expect(push.status, await push.clone().text()).toBe(200);
    const pushed = [];
    for (let i = 0; i < 4; i++) pushed.push(await check('pushed', 'bob'));
    expect(pushed).toEqual([[200, 2], [200, 1], [200, 0], [429, 0]]);

    // Keys that come back: one the store kept has its count; the flood's first, evicted by
    // --max-keys (the least recent of the lightest), starts afresh, never on another window's count.
    expect(await limit('returner', 777_777)).toBe(2);
    expect(await limit('flood', floodWindow(0))).toBe(4);
    expect(await limit('flood', floodWindow(FLOOD - 1))).toBe(3);
  }, 60_000);
});

describe('the memory store numbers the states it holds keys of', () => {
  it('a number freed with its state\'s last key and given to another state never hands that state the first\'s counts', async () => {
    // 30 states, 2 keys, hits and resets at random: a reset of a state's last key frees its number,
    // which the next new state takes. Every count is checked against a model of (state, key) → hits.
    const store = memoryStore({ sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    const policies = Array.from({ length: 30 }, (_, i) => compilePolicy({ algorithm: 'fixed-window', limit: 1_000, window: 3_600_000 + i }));
    const counts = new Map<string, number>();
    const keysOfState = new Map<string, number>();
    let seed = 27;
    const random = (below: number): number => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return (seed >>> 8) % below;
    };
    const wrong: string[] = [];
    let freed = 0;
    for (let step = 0; step < 6_000; step++) {
      const policy = policies[random(policies.length)]!;
      const key = `k${random(2)}`;
      const id = `${policy.stateId}|${key}`;
      const held = counts.get(id);
      if (random(3) === 0) {
        await limiter.reset(key, policy);
        if (held !== undefined) {
          counts.delete(id);
          const left = keysOfState.get(policy.stateId)! - 1;
          if (left === 0) freed += 1;
          keysOfState.set(policy.stateId, left);
        }
      } else {
        counts.set(id, (held ?? 0) + 1);
        if (held === undefined) keysOfState.set(policy.stateId, (keysOfState.get(policy.stateId) ?? 0) + 1);
        const remaining = limiter.limitSync(key, policy, { now: NOW }).remaining;
        if (remaining !== 1_000 - (held ?? 0) - 1) wrong.push(`${id} at step ${step}: ${remaining} remaining, expected ${1_000 - (held ?? 0) - 1}`);
      }
      const states = [...keysOfState.values()].filter((count) => count > 0).length;
      if (store.stats().spaces !== states) wrong.push(`step ${step}: ${store.stats().spaces} spaces, ${states} states held`);
    }
    expect(wrong).toEqual([]);
    // Numbers were freed (and given again) many times over.
    expect(freed).toBeGreaterThan(300);
  });

  it('a policy in use keeps its keys\' counts whatever windows others name, and the states held never pass the keys', () => {
    const store = memoryStore({ maxKeys: 100_000, sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    // As a middleware or the rules hold it: one compiled policy, used for the whole run.
    const held = compilePolicy({ algorithm: 'token-bucket', limit: 10, window: '1h' });
    for (let i = 0; i < 7; i++) limiter.limitSync('alice', held, { now: NOW });
    let admitted = 0;
    for (let i = 0; i < FLOOD; i++) {
      const adHoc: Policy = { algorithm: 'fixed-window', limit: 5, window: floodWindow(i) };
      if (limiter.limitSync('flood', adHoc, { now: NOW }).allowed) admitted += 1;
    }
    expect(admitted).toBe(FLOOD);
    expect(store.stats()).toMatchObject({ keys: FLOOD + 1, spaces: FLOOD + 1 });
    expect(limiter.limitSync('alice', held, { now: NOW })).toMatchObject({ allowed: true, remaining: 2 });
    // Each state's last key gone, its number is freed: the states held follow the keys down.
    // (A key decided at an explicit `now` lives its lifetime in real time: pruned hours from now.)
    expect(store.prune(Date.now() + 3 * 3_600_000)).toBe(FLOOD + 1);
    expect(store.stats()).toMatchObject({ keys: 0, spaces: 0 });
    expect(limiter.limitSync('alice', held, { now: NOW })).toMatchObject({ allowed: true, remaining: 9 });
  });
});
