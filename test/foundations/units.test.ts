import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/duration.js';
import { ENVOY_UNIT_NAMES, RULE_UNIT_NAMES, UNIT_SECONDS, compactWindow, describeWindow, ruleWindowMs } from '../../src/units.js';

describe('time units', () => {
  it.each([
    [1, '1ms', '1 ms'],
    [1500, '1500ms', '1500 ms'],
    [1000, '1s', 'second'],
    [90_000, '90s', '90 seconds'],
    [60_000, '1m', 'minute'],
    [120_000, '2m', '2 minutes'],
    [3_600_000, '1h', 'hour'],
    [7_200_000, '2h', '2 hours'],
    [86_400_000, '1d', 'day'],
    [2_592_000_000, '30d', '30 days'],
    [604_800_000, '1w', 'week'],
    [1_209_600_000, '2w', '2 weeks'],
  ])('%d ms is %s and "%s"', (ms, compact, words) => {
    expect(compactWindow(ms)).toBe(compact);
    expect(describeWindow(ms)).toBe(words);
    expect(parseDuration(compact)).toBe(ms);
  });

  it("has envoy's units, month as 30 days and year as 365, with envoy's enum names", () => {
    expect(RULE_UNIT_NAMES).toEqual(['second', 'minute', 'hour', 'day', 'week', 'month', 'year']);
    expect(UNIT_SECONDS).toEqual({ second: 1, minute: 60, hour: 3_600, day: 86_400, week: 604_800, month: 2_592_000, year: 31_536_000 });
    expect(ENVOY_UNIT_NAMES).toEqual({ second: 'SECOND', minute: 'MINUTE', hour: 'HOUR', day: 'DAY', week: 'WEEK', month: 'MONTH', year: 'YEAR' });
    expect(ruleWindowMs('hour', 3)).toBe(10_800_000);
  });

  it("names only units that envoy's RateLimit.Unit enum has", () => {
    const proto = readFileSync(new URL('../../src/service/grpc/proto/envoy/service/ratelimit/v3/rls.proto', import.meta.url), 'utf8');
    const enumBody = /enum Unit \{([^}]*)\}/.exec(proto)![1]!;
    const protoNames = [...enumBody.matchAll(/(\w+) = \d+;/g)].map((match) => match[1]);
    expect(protoNames).toEqual(expect.arrayContaining(Object.values(ENVOY_UNIT_NAMES)));
  });
});
