/**
 * `simulate()` on synthetic traffic whose answer is known by hand: exact allowed / throttled
 * counts per limit and per key, window boundaries, simulated time (out-of-order entries), the
 * busiest keys and their error bound, the timeline, and algorithms compared on the same traffic.
 */
import { describe, expect, it } from 'vitest';
import { parseRules } from '../../src/rules/parse/index.js';
import { mappingFromFlags, parseMapping, simulate, type LogEntry, type SimulationReport } from '../../src/simulate/index.js';

const T0 = Date.UTC(2026, 10, 27, 10, 0, 0);

function rules(yaml: string) {
  return parseRules(yaml, 'test.yaml');
}

const PER_IP_5_PER_SECOND = rules('domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 5 }\n');
const BY_IP = mappingFromFlags(['api'], ['remote_address=ip']);

/** `count` requests from `ip`, evenly spread over [at, at + spanMs). */
function burst(ip: string, at: number, count: number, spanMs = 1_000): LogEntry[] {
  return Array.from({ length: count }, (_, i) => ({ time: at + Math.floor((i * spanMs) / count), fields: { ip } }));
}

function byTime(entries: LogEntry[]): LogEntry[] {
  return entries.sort((a, b) => a.time - b.time);
}

function onlyRule(report: SimulationReport, run = 0) {
  expect(report.runs[run]!.rules).toHaveLength(1);
  return report.runs[run]!.rules[0]!;
}

describe('simulate() counts exactly', () => {
  it('10 requests in one second against 5 per second: 5 allowed, 5 throttled', async () => {
    const report = await simulate({ rules: PER_IP_5_PER_SECOND, entries: burst('203.0.113.1', T0, 10), mapping: BY_IP });
    const rule = onlyRule(report);
    expect(rule).toMatchObject({ rule: 'api.remote_address', domain: 'api', limit: '5 per second', algorithm: 'fixed-window', requests: 10, allowed: 5, throttled: 5 });
    expect(report.runs[0]).toMatchObject({ algorithm: 'rules', requests: 10, allowed: 5, throttled: 5 });
    expect(rule.topByThrottled).toEqual([{ key: 'api|remote_address=203.0.113.1', count: 5, error: 0 }]);
  });

  it('two addresses count separately', async () => {
    const entries = byTime([...burst('203.0.113.1', T0, 10), ...burst('203.0.113.2', T0, 4)]);
    const rule = onlyRule(await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP }));
    expect(rule).toMatchObject({ requests: 14, allowed: 9, throttled: 5, keys: 2 });
    expect(rule.topByRequests).toEqual([
      { key: 'api|remote_address=203.0.113.1', count: 10, error: 0 },
      { key: 'api|remote_address=203.0.113.2', count: 4, error: 0 },
    ]);
    expect(rule.topByThrottled.map((top) => top.key)).toEqual(['api|remote_address=203.0.113.1']);
  });

  it('a new fixed window starts a new count: 8 in the last 200 ms of a second and 8 in the first 200 ms of the next', async () => {
    const entries = [...burst('203.0.113.1', T0 + 800, 8, 200), ...burst('203.0.113.1', T0 + 1_000, 8, 200)];
    const rule = onlyRule(await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP }));
    expect(rule).toMatchObject({ requests: 16, allowed: 10, throttled: 6 });
  });

  it('the same traffic on sliding-log admits only 5 in any rolling second', async () => {
    const entries = [...burst('203.0.113.1', T0 + 800, 8, 200), ...burst('203.0.113.1', T0 + 1_000, 8, 200)];
    const report = await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP, algorithms: ['sliding-log'] });
    expect(onlyRule(report)).toMatchObject({ algorithm: 'sliding-log', allowed: 5, throttled: 11 });
  });

  it('decides at the log times, not the clock: a day-long gap refills everything', async () => {
    const entries = [...burst('203.0.113.1', T0, 6), ...burst('203.0.113.1', T0 + 86_400_000, 6)];
    const report = await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP });
    expect(onlyRule(report)).toMatchObject({ allowed: 10, throttled: 2 });
    expect(report).toMatchObject({ entries: 12, start: T0, end: T0 + 86_400_000 + Math.floor((5 * 1_000) / 6), outOfOrder: 0 });
  });

  it('an entry earlier than one already seen is counted and decided at the latest time seen (the clock never goes back)', async () => {
    // 5 at T0+1.5 s fill the second [T0+1 s, T0+2 s); 3 stragglers stamped T0+0.2 s are decided at T0+1.5 s too.
    const entries = [...burst('203.0.113.1', T0 + 1_500, 5, 1), ...burst('203.0.113.1', T0 + 200, 3, 1)];
    const report = await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP });
    expect(report.outOfOrder).toBe(3);
    expect(onlyRule(report)).toMatchObject({ allowed: 5, throttled: 3 });
    expect(report.end).toBe(T0 + 1_500);
  });

  it('refuses an entry whose time is not epoch ms, naming it', async () => {
    const entries = [...burst('203.0.113.1', T0, 2), { time: Number.NaN, fields: { ip: 'a' }, line: 7 }];
    await expect(simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP })).rejects.toThrow('simulate: entry 3 (line 7) has time NaN; give each entry its time in epoch ms');
  });

  it('an entry without the mapped field makes no request and is counted as unmapped', async () => {
    const entries: LogEntry[] = [{ time: T0, fields: {} }, ...burst('203.0.113.1', T0, 2)];
    const report = await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP });
    expect(report).toMatchObject({ entries: 3, unmapped: 1 });
    expect(onlyRule(report).requests).toBe(2);
  });
});

describe('simulate() with shadow mode', () => {
  it('counts what a shadow-mode limit would throttle, while the requests pass', async () => {
    const shadow = rules('domain: api\ndescriptors:\n  - key: remote_address\n    shadow_mode: true\n    rate_limit: { unit: second, requests_per_unit: 5 }\n');
    const report = await simulate({ rules: shadow, entries: burst('203.0.113.1', T0, 8), mapping: BY_IP });
    expect(report.runs[0]).toMatchObject({ requests: 8, allowed: 8, throttled: 0 });
    expect(onlyRule(report)).toMatchObject({ shadowMode: true, requests: 8, allowed: 5, throttled: 3 });
  });
});

describe('simulate() with a mapping', () => {
  const LOGIN_RULES = rules(
    'domain: api\ndescriptors:\n  - key: action\n    value: login\n    descriptors:\n      - key: user\n        rate_limit: { unit: minute, requests_per_unit: 3, algorithm: sliding-log }\n',
  );
  const mapping = parseMapping(
    { requests: [{ domain: 'api', when: { method: 'POST', path: '/login*' }, descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', field: 'user' }] }] }] },
    'test mapping',
  );

  it('applies literal values and `when` (a trailing * is a prefix)', async () => {
    const entries: LogEntry[] = [
      ...[0, 1, 2, 3, 4].map((s) => ({ time: T0 + s * 1_000, fields: { method: 'POST', path: '/login/form', user: 'mallory' } })),
      { time: T0 + 5_000, fields: { method: 'GET', path: '/login', user: 'mallory' } },
      { time: T0 + 6_000, fields: { method: 'POST', path: '/logout', user: 'mallory' } },
    ];
    const report = await simulate({ rules: LOGIN_RULES, entries, mapping });
    expect(onlyRule(report)).toMatchObject({ rule: 'api.action=login.user', limit: '3 per minute', requests: 5, allowed: 3, throttled: 2 });
    expect(report.unmapped).toBe(2);
  });
});

describe('simulate() compares algorithms on the same traffic', () => {
  // 3 a minute per user: attempts at 11, 13, 15, 17, 21 s, then 71 and 73 s (by hand below).
  const RULES = rules('domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n');
  const SECONDS = [11, 13, 15, 17, 21, 71, 73];
  const entries = SECONDS.map((s) => ({ time: T0 + s * 1_000, fields: { user: 'mallory' } }));
  const mapping = mappingFromFlags(['api'], ['user=user']);

  it('runs each algorithm separately and counts the decisions that differ from sliding-log, both ways', async () => {
    const report = await simulate({ rules: RULES, entries, mapping, algorithms: ['fixed-window', 'sliding-window', 'token-bucket'], compareTo: 'sliding-log' });
    expect(report.compareTo).toBe('sliding-log');
    const summary = report.runs.map((run) => [run.algorithm, run.rules[0]!.allowed, run.rules[0]!.throttled, run.rules[0]!.difference]);
    expect(summary).toEqual([
      // sliding-log: 11, 13, 15 in; 17, 21 out; at 71 the rolling minute (11 s, 71 s] holds 13, 15: in; at 73 (13, 73]: 15, 71: in → 5 / 2.
      // fixed-window: minute 0 takes 11, 13, 15; minute 1 takes 71, 73 → the same 5 / 2.
      ['fixed-window', 5, 2, { compared: 7, allowedOnlyHere: 0, allowedOnlyByReference: 0 }],
      // sliding-window: at 73 s the previous minute's 3 weigh 3 × 47/60 = 2.35 → 2, plus 71 → 3 + 1 > 3: out.
      ['sliding-window', 4, 3, { compared: 7, allowedOnlyHere: 0, allowedOnlyByReference: 1 }],
      // token-bucket (3, a token per 20 s): 11, 13, 15 in; 17 out (0.3 token); 21 out (0.5);
      // 71: 2.8 tokens; 73: 2.9 → both in: 5 / 2, the same decisions.
      ['token-bucket', 5, 2, { compared: 7, allowedOnlyHere: 0, allowedOnlyByReference: 0 }],
    ]);
  });

  it('finds the decisions token-bucket allows that sliding-log refuses', async () => {
    // 3 at once, then one every 20 s: the bucket refills a token each 20 s; the log still holds 3 within the minute.
    const steady = [0, 0, 0, 20, 40].map((s) => ({ time: T0 + s * 1_000, fields: { user: 'u' } }));
    const report = await simulate({ rules: RULES, entries: steady, mapping, algorithms: ['token-bucket'], compareTo: 'sliding-log' });
    expect(report.runs[0]!.rules[0]).toMatchObject({ allowed: 5, throttled: 0, difference: { compared: 5, allowedOnlyHere: 2, allowedOnlyByReference: 0 } });
  });

  it('compares variants of one algorithm: more rate_limit fields, under a label of their own', async () => {
    const burst3 = [0, 0, 0].map((s) => ({ time: T0 + s, fields: { user: 'u' } }));
    const report = await simulate({
      rules: RULES,
      entries: burst3,
      mapping,
      algorithms: ['token-bucket', { algorithm: 'token-bucket', label: 'token-bucket, burst 1', rateLimit: { burst: 1 } }],
      compareTo: 'sliding-log',
    });
    expect(report.runs.map((run) => [run.algorithm, run.rules[0]!.allowed, run.rules[0]!.difference!.allowedOnlyByReference])).toEqual([
      ['token-bucket', 3, 0],
      ['token-bucket, burst 1', 1, 2],
    ]);
    await expect(simulate({ rules: RULES, entries: burst3, mapping, algorithms: ['gcra', { algorithm: 'gcra' }] })).rejects.toThrow(/names a run twice \(gcra, gcra\)/);
  });

  it('compares rules written with a sliding-window precision against another algorithm (the precision stays with sliding-window)', async () => {
    const precise = rules('domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 3, algorithm: sliding-window, precision: 10 }\n');
    const steady = [0, 0, 0, 20, 40].map((s) => ({ time: T0 + s * 1_000, fields: { user: 'u' } }));
    const report = await simulate({ rules: precise, entries: steady, mapping, algorithms: ['token-bucket', { algorithm: 'sliding-window', label: 'precision 4', rateLimit: { precision: 4 } }], compareTo: 'sliding-log' });
    expect(report.runs.map((run) => [run.algorithm, run.rules[0]!.allowed])).toEqual([['token-bucket', 5], ['precision 4', 3]]);
    const asWritten = await simulate({ rules: precise, entries: steady, mapping, compareTo: 'sliding-log' });
    expect(asWritten.runs[0]!.rules[0]).toMatchObject({ allowed: 3, difference: { allowedOnlyHere: 0, allowedOnlyByReference: 0 } });
  });

  it('leaves quota-mode limits on fixed-window (only it counts every hit), and says so', async () => {
    const quota = rules('domain: api\ndescriptors:\n  - key: user\n    quota_mode: true\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n');
    const report = await simulate({ rules: quota, entries, mapping, algorithms: ['sliding-window'] });
    expect(report.runs[0]!.rules[0]).toMatchObject({ algorithm: 'fixed-window', requests: 7 });
  });

  it('refuses an algorithm that does not exist', async () => {
    await expect(simulate({ rules: RULES, entries, mapping, algorithms: ['sliding-windw' as 'gcra'] })).rejects.toThrow(/--algorithm "sliding-windw" is not one of token-bucket, leaky-bucket/);
  });
});

describe('simulate() in bounded memory', () => {
  it('keeps the busiest keys with Space-Saving: counts never below the truth, at most `error` above', async () => {
    // Keys k0..k19, key i sent (20 − i) × 5 times, interleaved; only 8 tracked.
    const truth = new Map<string, number>();
    const entries: LogEntry[] = [];
    for (let round = 0; round < 100; round++) {
      for (let i = 0; i < 20; i++) {
        if (round < (20 - i) * 5) {
          entries.push({ time: T0 + round, fields: { ip: `k${i}` } });
          truth.set(`k${i}`, (truth.get(`k${i}`) ?? 0) + 1);
        }
      }
    }
    const report = await simulate({ rules: rules('domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: day, requests_per_unit: 100000 }\n'), entries, mapping: BY_IP, topKeys: 5, trackedKeys: 8 });
    const top = onlyRule(report).topByRequests;
    expect(top.map((t) => t.key)).toEqual(['api|remote_address=k0', 'api|remote_address=k1', 'api|remote_address=k2', 'api|remote_address=k3', 'api|remote_address=k4']);
    for (const { key, count, error } of top) {
      const real = truth.get(key.split('=')[1]!)!;
      expect(count).toBeGreaterThanOrEqual(real);
      expect(count - error).toBeLessThanOrEqual(real);
    }
  });

  it('widens the timeline to fit a long log, keeping every count', async () => {
    // One request a minute for 10 hours (600 minutes) into at most 240 buckets: 4-minute buckets.
    const entries = Array.from({ length: 600 }, (_, i) => ({ time: T0 + i * 60_000, fields: { ip: 'a' } }));
    const rule = onlyRule(await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP, maxBuckets: 240 }));
    expect(rule.timeline.bucketMs).toBe(4 * 60_000);
    expect(rule.timeline.buckets.length).toBeLessThanOrEqual(240);
    expect(rule.timeline.buckets.reduce((sum, b) => sum + b.allowed, 0)).toBe(600);
    expect(rule.timeline.buckets.every((b, i, all) => i === 0 || b.start - all[i - 1]!.start === 4 * 60_000)).toBe(true);
  });

  it('puts throttling in the minute it happened', async () => {
    const entries = [...burst('a', T0 + 60_000, 7), ...burst('a', T0 + 180_000, 9)];
    const { buckets } = onlyRule(await simulate({ rules: PER_IP_5_PER_SECOND, entries, mapping: BY_IP })).timeline;
    expect(buckets).toEqual([
      { start: T0 + 60_000, allowed: 5, throttled: 2 },
      { start: T0 + 120_000, allowed: 0, throttled: 0 },
      { start: T0 + 180_000, allowed: 5, throttled: 4 },
    ]);
  });
});
