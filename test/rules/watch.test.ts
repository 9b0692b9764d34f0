/**
 * Hot reload from disk: a change is swapped in, a broken file keeps the last good rules (and says
 * so), and checks running during swaps always see one whole rule set.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RulesHolder, createLimiter, memoryStore } from '../../src/index.js';
import { loadRules } from '../../src/rules/load.js';
import { watchRules, type RulesWatcher } from '../../src/rules/watch.js';
import { compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse.js';

const NOW = 1_700_000_000_000;
const rulesWith = (limit: number) => `domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: ${limit} }\n`;
const userCheck = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }], now: NOW };

let dir: string;
let watcher: RulesWatcher | undefined;

afterEach(() => {
  watcher?.close();
  watcher = undefined;
  rmSync(dir, { recursive: true, force: true });
});

async function start(limit: number) {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-'));
  writeFileSync(join(dir, 'api.yaml'), rulesWith(limit));
  const holder = new RulesHolder(await loadRules(dir));
  const errors: unknown[] = [];
  watcher = watchRules(dir, holder, { pollIntervalMs: 60_000, onError: (error) => errors.push(error) });
  await watcher.reload();
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: holder });
  return { holder, limiter, errors };
}

const limitInForce = async (limiter: ReturnType<typeof createLimiter>) =>
  (await limiter.check(userCheck)).statuses[0]!.currentLimit?.requestsPerUnit;

describe('watchRules', () => {
  it('swaps in a changed file, and shows the new version', async () => {
    const { holder, limiter } = await start(5);
    const before = holder.current.version;
    expect(await limitInForce(limiter)).toBe(5);
    writeFileSync(join(dir, 'api.yaml'), rulesWith(7));
    await watcher!.reload();
    expect(await limitInForce(limiter)).toBe(7);
    expect(holder.current.version).not.toBe(before);
    expect(watcher!.status()).toMatchObject({ reloads: 2, failures: 0, lastError: undefined });
  });

  it('notices a change on its own (file events, or the poll as a fallback)', async () => {
    const { limiter } = await start(5);
    writeFileSync(join(dir, 'api.yaml'), rulesWith(9));
    await expect.poll(() => limitInForce(limiter), { timeout: 2_000, interval: 20 }).toBe(9);
  });

  it('keeps the last good rules when a file breaks, reports the error, and recovers', async () => {
    const { holder, limiter, errors } = await start(5);
    const good = holder.current.version;
    writeFileSync(join(dir, 'api.yaml'), 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n');
    await watcher!.reload();
    expect(holder.current.version).toBe(good);
    expect(await limitInForce(limiter)).toBe(5);
    expect(watcher!.status()).toMatchObject({ failures: 1 });
    expect(watcher!.status().lastError).toMatch(/api\.yaml:4:\d+: .*unit/);
    expect(errors).toHaveLength(1);
    writeFileSync(join(dir, 'api.yaml'), rulesWith(6));
    await watcher!.reload();
    expect(await limitInForce(limiter)).toBe(6);
    expect(watcher!.status().lastError).toBeUndefined();
  });
});

describe('reload under load', () => {
  it('a check never sees a half-applied rule set', async () => {
    const two = (limit: number) =>
      compileRules(parseRules(`domain: api\ndescriptors:\n  - key: a\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n  - key: b\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n`, 'x.yaml'));
    const versions = [two(1_000_000), two(2_000_000)];
    const holder = new RulesHolder(versions[0]);
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: holder });
    const request = { domain: 'api', descriptors: [{ entries: [{ key: 'a', value: '1' }] }, { entries: [{ key: 'b', value: '1' }] }] };
    const seen = new Set<string>();
    for (let round = 0; round < 200; round++) {
      const checks = Array.from({ length: 20 }, () => limiter.check(request));
      holder.replace(versions[round % 2]!);
      for (const result of await Promise.all(checks)) {
        const limits = result.statuses.map((s) => s.currentLimit!.requestsPerUnit);
        expect(limits[0]).toBe(limits[1]);
        seen.add(String(limits[0]));
      }
    }
    expect([...seen].sort()).toEqual(['1000000', '2000000']);
  });
});
