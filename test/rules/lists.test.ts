/**
 * A domain's allow and deny lists: read from YAML (every mistake at file:line:col), decided before
 * any limit without a store call, IPv4 and IPv6 networks matching addresses however written, and
 * swapped with the rules when the file changes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, redisStore } from '../../src/index.js';
import { loadRules } from '../../src/rules/load.js';
import { checkRules, parseRules } from '../../src/rules/parse/index.js';
import { RulesHolder, compileRules } from '../../src/rules/ruleset.js';
import { watchRules } from '../../src/rules/watch.js';
import { startApp } from '../support/http-apps.js';
import { useRedisServer } from '../support/redis-topologies.js';

const redis = useRedisServer();
const NOW = 1_700_000_000_000;

const RULES = `domain: api
allow:
  - key: remote_address
    values: ['10.0.0.0/8', '::1', '2001:db8::/32']
deny:
  - key: remote_address
    values: ['10.6.6.6']
  - key: user
    values: [mallory]
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1 }
`;

const byIp = (ip: string) => ({ domain: 'api', descriptors: [{ entries: [{ key: 'remote_address', value: ip }] }], now: NOW });

function memoryLimiter(text = RULES) {
  return createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(text, 'rules.yaml')) });
}

describe('allow and deny lists', () => {
  it('are read into the domain as written', () => {
    const [domain] = parseRules(RULES, 'rules.yaml');
    expect(domain!.allow).toEqual([{ key: 'remote_address', values: ['10.0.0.0/8', '::1', '2001:db8::/32'], location: { file: 'rules.yaml', line: 3, column: 5 } }]);
    expect(domain!.deny!.map((list) => [list.key, list.values])).toEqual([
      ['remote_address', ['10.6.6.6']],
      ['user', ['mallory']],
    ]);
  });

  it.each([
    ['10.0.0.0/33', 'rules.yaml:4:14: allow[0].values[0]: "10.0.0.0/33" is not a CIDR: the prefix length must be a whole number from 0 to 32 for an IPv4 address'],
    ['2001:db8::/129', 'rules.yaml:4:14: allow[0].values[0]: "2001:db8::/129" is not a CIDR: the prefix length must be a whole number from 0 to 128 for an IPv6 address'],
    ['10.0.0/8', 'rules.yaml:4:14: allow[0].values[0]: "10.0.0/8" is not a CIDR: "10.0.0" is not an IPv4 or IPv6 address (write 10.0.0.0/8 or 2001:db8::/32)'],
    ["''", 'rules.yaml:4:14: allow[0].values[0]: empty value: write the value, or remove the line'],
  ])('refuse the value %s at its line and column', (value, message) => {
    const text = `domain: api\nallow:\n  - key: remote_address\n    values: [${value}]\n`;
    expect(checkRules(text, 'rules.yaml').errors.map((error) => error.message)).toEqual([message]);
  });

  it('refuse entries without key or values, and misspelt fields, at their line and column', () => {
    const text = 'domain: api\ndeny:\n  - values: [a]\n  - key: user\n  - key: user\n    value: mallory\n  - key: user\n    values: mallory\n';
    expect(checkRules(text, 'rules.yaml').errors.map((error) => error.message)).toEqual([
      'rules.yaml:3:5: deny[0].key: missing key: name the descriptor key the values are of (key: remote_address)',
      "rules.yaml:4:5: deny[1].values: missing values: list the values (values: ['10.0.0.0/8', 'mallory'])",
      "rules.yaml:5:5: deny[2].values: missing values: list the values (values: ['10.0.0.0/8', 'mallory'])",
      'rules.yaml:6:5: deny[2].value: "value" is written values: [...] in a list entry (a list of values)',
      "rules.yaml:8:13: deny[3].values: expected a list of values (values: ['10.0.0.0/8', '::1']), got \"mallory\"",
    ]);
  });

  it('are refused inside a descriptor, and block_duration outside rate_limit, saying where they go', () => {
    const text = 'domain: api\ndescriptors:\n  - key: user\n    deny:\n      - { key: user, values: [mallory] }\n    block_duration: 1m\n';
    expect(checkRules(text, 'rules.yaml').errors.map((error) => error.message)).toEqual([
      'rules.yaml:4:5: descriptors[0].deny: "deny" belongs at the top of the document (a domain\'s list, beside descriptors), not in a descriptor',
      'rules.yaml:6:5: descriptors[0].block_duration: "block_duration" belongs inside rate_limit, not directly in the descriptor',
    ]);
  });

  it('admit a listed address without limit, IPv4, IPv6 and IPv4-mapped alike; refuse a denied one; deny wins', async () => {
    const limiter = memoryLimiter();
    for (const ip of ['10.1.2.3', '::1', '0:0:0:0:0:0:0:1', '2001:db8:ffff::7', '::ffff:10.9.9.9']) {
      for (let i = 0; i < 3; i++) {
        const result = await limiter.check(byIp(ip));
        expect(result.overallCode, ip).toBe('OK');
        expect(result.statuses[0]).toMatchObject({ rule: 'api.allow.remote_address', list: 'allow' });
      }
    }
    // 10.6.6.6 is inside the allowed 10.0.0.0/8 and on the deny list: refused.
    expect(await limiter.check(byIp('10.6.6.6'))).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', rule: 'api.deny.remote_address', list: 'deny' }] });
    // Off the lists, the limit decides: one a minute.
    expect((await limiter.check(byIp('192.0.2.1'))).overallCode).toBe('OK');
    expect((await limiter.check(byIp('192.0.2.1'))).overallCode).toBe('OVER_LIMIT');
    // A request with any denied entry is refused, its other descriptors untouched.
    const mixed = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'ann' }] }, { entries: [{ key: 'user', value: 'mallory' }] }], now: NOW };
    expect(await limiter.check(mixed)).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OK' }, { code: 'OVER_LIMIT', rule: 'api.deny.user' }] });
    expect((await limiter.check({ ...mixed, descriptors: [mixed.descriptors[0]!] })).overallCode).toBe('OK');
    await limiter.close();
  });

  it('refuse through the middleware in rules mode, which passes an allowed address unlimited', async () => {
    const rules = compileRules(parseRules(RULES, 'rules.yaml'));
    let ip = '10.6.6.6';
    const app = await startApp('express', [{ rules, domain: 'api', descriptors: () => [{ entries: [{ key: 'remote_address', value: ip }] }] }]);
    try {
      const refused = await fetch(`${app.url}/hello`);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      // A refusal as by a limit of 0 (its name, the list's rule, is in the IETF headers' policy).
      expect(refused.headers.get('x-ratelimit-limit')).toBe('0');
      expect(JSON.parse(await refused.text())).toMatchObject({ error: 'rate_limited', limit: 0, remaining: 0 });
      ip = '10.1.1.1';
      for (let i = 0; i < 3; i++) expect((await fetch(`${app.url}/hello`)).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('decide without a store call', async () => {
    const store = redisStore({ url: redis.url });
    redis.stores.push(store);
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 5_000, rules: compileRules(parseRules(RULES, 'rules.yaml')) });
    redis.cli('CONFIG', 'RESETSTAT');
    for (let i = 0; i < 20; i++) {
      expect((await limiter.check(byIp('10.0.0.1'))).overallCode).toBe('OK');
      expect((await limiter.check(byIp('10.6.6.6'))).overallCode).toBe('OVER_LIMIT');
    }
    expect(redis.cli('INFO', 'commandstats')).not.toMatch(/cmdstat_(evalsha|eval|fcall):/);
    // A request off the lists does reach Redis.
    await limiter.check(byIp('192.0.2.1'));
    expect(redis.cli('INFO', 'commandstats')).toMatch(/cmdstat_(evalsha|eval|fcall):calls=1,/);
  });

  it('change with the rules file, on reload', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-lists-'));
    try {
      writeFileSync(join(dir, 'api.yaml'), RULES);
      const holder = new RulesHolder(await loadRules(dir));
      const watcher = watchRules(dir, holder, { pollIntervalMs: 60_000, settleMs: 20 });
      const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: holder });
      expect((await limiter.check(byIp('10.6.6.6'))).overallCode).toBe('OVER_LIMIT');
      writeFileSync(join(dir, 'api.yaml'), RULES.replace("values: ['10.6.6.6']", "values: ['192.0.2.0/24']"));
      await watcher.reload();
      expect((await limiter.check(byIp('10.6.6.6'))).statuses[0]).toMatchObject({ code: 'OK', list: 'allow' });
      expect((await limiter.check(byIp('192.0.2.77'))).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', list: 'deny' });
      watcher.close();
      await limiter.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
