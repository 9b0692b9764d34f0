/**
 * `block_duration` in rules: a rate_limit's penalty, read with its unit and checked at
 * `file:line:col`, and enforced by check() as the policy's blockDuration.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { checkRules, parseRules } from '../../src/rules/parse/index.js';
import { compileRules } from '../../src/rules/ruleset.js';

const NOW = 1_700_000_000_000;

function rules(blockDuration: string, extra = ''): string {
  return ['domain: api', 'descriptors:', '  - key: user', '    rate_limit:', '      unit: second', '      requests_per_unit: 1', `      block_duration: ${blockDuration}`, extra].join('\n');
}

describe('block_duration', () => {
  it('blocks the descriptor after its first denial, for the duration from that denial', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(rules('10m'), 'rules.yaml')) });
    const at = (now: number) => limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'ann' }] }], now });
    expect((await at(NOW)).overallCode).toBe('OK');
    expect((await at(NOW + 1)).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', durationUntilReset: 600_000 });
    // A second later the quota is back, the block is not; denials during it do not extend it.
    expect((await at(NOW + 300_000)).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', durationUntilReset: 300_001 });
    expect((await at(NOW + 600_000)).overallCode).toBe('OVER_LIMIT');
    expect((await at(NOW + 600_001)).overallCode).toBe('OK');
    await limiter.close();
  });

  it.each([
    ['600', 'rules.yaml:7:23: descriptors[0].rate_limit.block_duration: block_duration must be a duration with its unit, like 10m or 30s, got 600'],
    ['10x', 'rules.yaml:7:23: descriptors[0].rate_limit.block_duration: block_duration "10x" is not a duration: write a whole number and one unit of ms, s, m, h, d or w (e.g. "1m")'],
    ['31d', 'rules.yaml:7:23: descriptors[0].rate_limit.block_duration: block_duration 31d is longer than 2592000000 ms'],
  ])('refuses %s at its line and column', (written, message) => {
    expect(checkRules(rules(written), 'rules.yaml').errors.map((error) => error.message)).toEqual([message]);
  });

  it('is refused beside lease_size or sync_interval_ms, which do not ask the store where the block is', () => {
    const { errors } = checkRules(rules('1m', '      lease_size: 10'), 'rules.yaml');
    expect(errors.map((error) => error.message)).toEqual([
      'rules.yaml:7:7: descriptors[0].rate_limit.block_duration: block_duration and lease_size: lease_size admits without asking the store, where the block is kept, so the block would not be honoured; keep one',
    ]);
  });
});
