/**
 * Hot reload from disk: a change is swapped in, a broken file keeps the last good rules (and says
 * so), and checks running during swaps always see one whole rule set.
 */
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { loadRules } from '../../src/rules/load.js';
import { watchRules, type RulesWatcher, type WatchRulesOptions } from '../../src/rules/watch.js';
import { RulesHolder, compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse/index.js';

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

/** The limit of [user=u] in the rules `holder` holds right now. */
const heldLimit = (holder: RulesHolder) => holder.current.domain('api')?.keyOnly.get('user')?.rule?.requestsPerUnit;

async function start(limit: number, options: WatchRulesOptions = {}, files: Record<string, string> = {}) {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-'));
  writeFileSync(join(dir, 'api.yaml'), rulesWith(limit));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const holder = new RulesHolder(await loadRules(dir));
  const errors: unknown[] = [];
  const warnings: string[] = [];
  /** The [user=u] limit of every rule set the watcher swapped in, as it was swapped in. */
  const applied: (number | undefined)[] = [];
  watcher = watchRules(dir, holder, {
    pollIntervalMs: 60_000,
    settleMs: 20,
    onError: (error) => errors.push(error),
    onWarning: (message) => warnings.push(message),
    onReload: () => applied.push(heldLimit(holder)),
    ...options,
  });
  await watcher.reload();
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: holder });
  return { holder, limiter, errors, warnings, applied };
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

describe('reload errors', () => {
  it('clear once a broken file is restored to the content in force', async () => {
    const { holder, errors } = await start(5);
    const good = holder.current.version;
    writeFileSync(join(dir, 'api.yaml'), rulesWith(5).replace('minute', 'fortnight'));
    await watcher!.reload();
    expect(watcher!.status().lastError).toMatch(/api\.yaml:4:\d+: .*unit "fortnight"/);
    writeFileSync(join(dir, 'api.yaml'), rulesWith(5));
    await watcher!.reload();
    expect(watcher!.status()).toMatchObject({ version: good, failures: 1, lastError: undefined });
    expect(errors).toHaveLength(1);
  });
});

describe('files that go away', () => {
  it('a deleted rules file removes its domain, with a warning naming the file and the domain', async () => {
    const { holder, warnings } = await start(5, {}, { 'other.yaml': 'domain: other\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n' });
    expect(holder.current.domainNames()).toEqual(['api', 'other']);
    unlinkSync(join(dir, 'other.yaml'));
    await watcher!.reload();
    expect(holder.current.domainNames()).toEqual(['api']);
    expect(warnings).toEqual([
      `rules reloaded without some domains, which no longer limit anything unless pushed: ${join(dir, 'other.yaml')} was removed, and with it "other"`,
    ]);
    expect(watcher!.status().lastError).toBeUndefined();
  });
});

describe('*.json rules files', () => {
  it('are watched and loaded like the YAML files next to them', async () => {
    const { holder } = await start(5);
    writeFileSync(join(dir, 'extra.json'), '{ "domain": "extra", "descriptors": [{ "key": "k", "rate_limit": { "unit": "second", "requests_per_unit": 2 } }] }\n');
    await watcher!.reload();
    expect(holder.current.domainNames()).toEqual(['api', 'extra']);
  });
});

describe('files caught while being written', () => {
  // Block style, so that the first part alone is valid YAML: "requests_per_unit: 1".
  const blockRules = (limit: number) => `domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: ${limit}\n`;

  it('a file written in two parts, with a pause shorter than settleMs, is applied only whole', async () => {
    const { holder, applied } = await start(5, { settleMs: 600 });
    const before = holder.current.version;
    const full = blockRules(1000);
    const cut = full.indexOf('1000') + 1;
    writeFileSync(join(dir, 'api.yaml'), full.slice(0, cut));
    await sleep(100);
    expect([heldLimit(holder), holder.current.version]).toEqual([5, before]);
    appendFileSync(join(dir, 'api.yaml'), full.slice(cut));
    expect([heldLimit(holder), holder.current.version]).toEqual([5, before]);
    await watcher!.reload();
    expect(heldLimit(holder)).toBe(1000);
    expect(applied).toEqual([5, 1000]); // the start, then the whole file: never the half
  });

  it('follows a symlink swapped atomically to a new directory (envoy runtime layout: rules -> rules-v2/)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-'));
    const link = join(dir, 'rules');
    mkdirSync(join(dir, 'rules-v1'));
    writeFileSync(join(dir, 'rules-v1', 'api.yaml'), rulesWith(5));
    symlinkSync('rules-v1', link);
    const holder = new RulesHolder(await loadRules(link));
    // No poll within the test: only watching can see the swap.
    watcher = watchRules(link, holder, { pollIntervalMs: 60_000, settleMs: 20 });
    await watcher.reload();

    mkdirSync(join(dir, 'rules-v2'));
    writeFileSync(join(dir, 'rules-v2', 'api.yaml'), rulesWith(9));
    symlinkSync('rules-v2', join(dir, 'rules.tmp'));
    renameSync(join(dir, 'rules.tmp'), link);
    await expect.poll(() => heldLimit(holder), { timeout: 3_000, interval: 20 }).toBe(9);

    // The watch now follows the new directory (the old one, still there, no longer counts).
    writeFileSync(join(dir, 'rules-v2', 'api.yaml'), rulesWith(11));
    await expect.poll(() => heldLimit(holder), { timeout: 3_000, interval: 20 }).toBe(11);
    rmSync(join(dir, 'rules-v1'), { recursive: true });
    await watcher.reload();
    expect([heldLimit(holder), watcher.status().failures, watcher.status().lastError]).toEqual([11, 0, undefined]);
  });
});

describe('watcher.reload() in a process with nothing else to do', () => {
  it('resolves after the settle wait instead of letting the process exit first (built package)', () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-'));
    const file = join(dir, 'api.yaml');
    writeFileSync(file, rulesWith(5));
    const script = `
      import { writeFileSync } from 'node:fs';
      import { loadRules } from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
      import { RulesHolder, watchRules } from ${JSON.stringify(new URL('../../dist/rules/index.js', import.meta.url).href)};
      const holder = new RulesHolder(await loadRules(${JSON.stringify(file)}));
      const watcher = watchRules(${JSON.stringify(file)}, holder, { settleMs: 50 });
      await watcher.reload();
      writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(rulesWith(7))});
      await watcher.reload();
      console.log(holder.current.domain('api').keyOnly.get('user').rule.requestsPerUnit);
      watcher.close();`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 10_000 });
    expect([run.stdout, run.stderr, run.status]).toEqual(['7\n', '', 0]);
  });
});

describe('watchRules options', () => {
  it.each([
    [{ settleMs: -1 }, 'watchRules: settleMs must be a whole number of ms ≥ 0, got -1'],
    [{ pollIntervalMs: 0 }, 'watchRules: pollIntervalMs must be a whole number of ms ≥ 1, got 0'],
    [{ settle: 100 }, 'watchRules: unknown option "settle"; the options are pollIntervalMs, settleMs, onError, onWarning, onReload'],
  ])('refuses %o', (options, message) => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-rules-'));
    expect(() => watchRules(dir, new RulesHolder(), options as WatchRulesOptions)).toThrow(message);
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
