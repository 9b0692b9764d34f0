/**
 * `share: { group, weight }` in rules: fair shares of a rate_limit's requests_per_unit among the
 * values of a descriptor, read and checked at `file:line:col`, and enforced by check() as the
 * policy's share.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { checkRules, parseRules } from '../../src/rules/parse/index.js';
import { compileRules } from '../../src/rules/ruleset.js';

const NOW = 1_800_000_000_000 - (1_800_000_000_000 % 60_000) + 1_000;

function rules(share: string, extra = ''): string {
  return [
    'domain: api',
    'descriptors:',
    '  - key: tenant',
    '    rate_limit:',
    '      unit: minute',
    '      requests_per_unit: 40',
    `      share: ${share}`,
    extra,
    '  - key: tenant',
    '    value: big',
    '    rate_limit:',
    '      unit: minute',
    '      requests_per_unit: 40',
    `      share: { group: tenants, weight: 3 }`,
  ].join('\n');
}

describe('share in rules', () => {
  it('the values of a descriptor share requests_per_unit by weight: 10 and 30 of 40 when both demand 100', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: false, rules: compileRules(parseRules(rules('{ group: tenants, weight: 1 }'), 'rules.yaml')) });
    const ask = async (value: string) => (await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'tenant', value }] }], now: NOW })).overallCode === 'OK';
    const admitted = { small: 0, big: 0 };
    for (let i = 0; i < 100; i++) {
      if (await ask('small')) admitted.small += 1;
      if (await ask('big')) admitted.big += 1;
    }
    expect(admitted).toEqual({ small: 10, big: 30 });
    await limiter.close();
  });

  it.each([
    ['{ group: tenants, weight: 0 }', 'rules.yaml:7:40: descriptors[0].rate_limit.share.weight: '],
    ['{ weight: 2 }', 'rules.yaml:7:14: descriptors[0].rate_limit.share.group: missing group'],
    ['tenants', 'rules.yaml:7:14: descriptors[0].rate_limit.share: '],
  ])('refuses share: %s at its line and column', (written, where) => {
    const messages = checkRules(rules(written), 'rules.yaml').errors.map((error) => error.message);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain(where);
  });

  it.each([
    ['      algorithm: token-bucket', "share applies to fixed-window only, not token-bucket; use algorithm: fixed-window"],
    ['      soft_percent: 10', 'share does not combine with soft_percent'],
    ['      lease_size: 10', 'share and lease_size'],
    ['      block_duration: 1m', 'share does not combine with block_duration'],
    ['    quota_mode: true', 'which a shared capacity (share) cannot'],
  ])('refuses share beside %s, naming the fix', (extra, message) => {
    const messages = checkRules(rules('{ group: tenants, weight: 1 }', extra), 'rules.yaml').errors.map((error) => error.message);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(/descriptors\[0\]\.(rate_limit\.share|quota_mode): /);
    expect(messages[0]).toContain(message);
  });
});
