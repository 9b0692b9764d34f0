/**
 * The rules loader on real YAML files: each invalid fixture (one file per mistake) fails with
 * exactly the listed errors, `file:line:col: path: problem`; each valid fixture parses into the
 * listed tree. Plus the limits (size, nesting, count) at and past their bounds.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RulesError } from '../../src/errors.js';
import { RULES_LIMITS, checkRules, countDescriptors, domainLocation, parseRules } from '../../src/rules/parse/index.js';
import type { DescriptorConfig, DomainConfig, RateLimitConfig } from '../../src/rules/types.js';

const fixtures = new URL('./fixtures/', import.meta.url);

function fixture(folder: 'invalid' | 'valid', file: string): string {
  return readFileSync(new URL(`${folder}/${file}`, fixtures), 'utf8');
}

const NESTED_65 = `${'descriptors[0].'.repeat(64)}descriptors`;

/** Every invalid fixture and all the errors it must produce, in order. */
const INVALID: Record<string, string[]> = {
  'yaml-syntax.yaml': ['yaml-syntax.yaml:5:1: YAML error: flow map in block collection must be sufficiently indented and end with a }'],
  'yaml-duplicate-key.yaml': ['yaml-duplicate-key.yaml:7:7: YAML error: key "unit" appears twice in the same mapping; keep one'],
  'yaml-tab-indent.yaml': ['yaml-tab-indent.yaml:3:1: YAML error: tabs are not allowed as indentation in YAML; indent with spaces'],
  'yaml-too-deep.yaml': ['yaml-too-deep.yaml:2:269: YAML nested deeper than 256 levels; flatten the rules'],
  'not-a-mapping.yaml': ['not-a-mapping.yaml:1:1: expected a mapping with domain and descriptors at the top of the document, got a list'],
  'empty-file.yaml': ['empty-file.yaml:1:1: no domain here: write a document like "domain: my_service" followed by its descriptors'],
  'missing-domain.yaml': ['missing-domain.yaml:1:1: domain: missing domain: every document names its domain (domain: my_service)'],
  'empty-domain.yaml': ['empty-domain.yaml:1:9: domain: domain must not be empty: name the domain (domain: my_service)'],
  'duplicate-domain.yaml': ['duplicate-domain.yaml:8:9: domain: domain "checkout" is already defined at duplicate-domain.yaml:1:9; define each domain once'],
  'unknown-key-typo.yaml': [
    'unknown-key-typo.yaml:6:7: descriptors[0].rate_limit.requests_per_units: unknown key "requests_per_units"; did you mean "requests_per_unit"?',
  ],
  'unknown-key-top-level.yaml': ['unknown-key-top-level.yaml:2:1: descriptor: unknown key "descriptor"; did you mean "descriptors"?'],
  'unknown-key-no-suggestion.yaml': [
    'unknown-key-no-suggestion.yaml:4:5: descriptors[0].colour: unknown key "colour"; a descriptor has key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric, quota_mode, share_threshold, metadata, concurrency, ledger',
  ],
  'misplaced-unlimited.yaml': ['misplaced-unlimited.yaml:4:5: descriptors[0].unlimited: "unlimited" belongs inside rate_limit, not directly in the descriptor'],
  'misplaced-shadow-mode.yaml': [
    'misplaced-shadow-mode.yaml:7:7: descriptors[0].rate_limit.shadow_mode: "shadow_mode" belongs to the descriptor (next to rate_limit), not inside rate_limit',
  ],
  'missing-key.yaml': ['missing-key.yaml:5:9: descriptors[0].descriptors[0].key: missing key: every descriptor needs a key (key: remote_address)'],
  'empty-key.yaml': ['empty-key.yaml:3:10: descriptors[0].key: key must not be empty: write the descriptor key to match (key: remote_address)'],
  'key-not-text.yaml': ['key-not-text.yaml:3:10: descriptors[0].key: key must be text, got a list'],
  'duplicate-descriptor.yaml': [
    'duplicate-descriptor.yaml:11:9: descriptors[0].descriptors[2]: duplicate descriptor: key "user" with no value is already at descriptors[0].descriptors[0] (line 6); merge the two or change the value',
  ],
  'descriptors-not-list.yaml': ['descriptors-not-list.yaml:3:3: descriptors: expected a list of descriptors (- key: ...), got a mapping'],
  'descriptors-too-deep.yaml': [`descriptors-too-deep.yaml:130:131: ${NESTED_65}: descriptors nest deeper than 64 levels; flatten the tree`],
  'too-many-descriptors.yaml': ['too-many-descriptors.yaml:4:721: descriptors[980].descriptors[39]: more than 100000 descriptors in one domain; split it into several domains'],
  'rate-limit-not-mapping.yaml': [
    'rate-limit-not-mapping.yaml:4:17: descriptors[0].rate_limit: expected a rate_limit mapping (unit, requests_per_unit, ...), got "10/second"',
  ],
  'bad-unit.yaml': [
    'bad-unit.yaml:5:13: descriptors[0].rate_limit.unit: unit "minutes" is not one of second, minute, hour, day, week, month, year; did you mean "minute"?',
  ],
  'missing-unit.yaml': [
    'missing-unit.yaml:5:7: descriptors[0].rate_limit.unit: missing unit: say what the limit counts per (unit: second, minute, hour, day, week, month, year), or set unlimited: true',
  ],
  'requests-per-unit-missing.yaml': [
    'requests-per-unit-missing.yaml:5:7: descriptors[0].rate_limit.requests_per_unit: missing requests_per_unit: say how many requests each unit allows (requests_per_unit: 100), or set unlimited: true',
  ],
  'requests-per-unit-negative.yaml': [
    'requests-per-unit-negative.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got -5',
  ],
  'requests-per-unit-fractional.yaml': [
    'requests-per-unit-fractional.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got 2.5',
  ],
  'requests-per-unit-not-number.yaml': [
    'requests-per-unit-not-number.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got "ten"',
  ],
  'requests-per-unit-quoted.yaml': [
    'requests-per-unit-quoted.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got "10" (text, not a number: remove the quotes)',
  ],
  'requests-per-unit-above-uint32.yaml': [
    'requests-per-unit-above-uint32.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got 4294967296',
  ],
  'unlimited-with-unit.yaml': [
    'unlimited-with-unit.yaml:6:7: descriptors[0].rate_limit.unit: unlimited: true takes no unit; remove unit, or remove unlimited to enforce a limit',
  ],
  'unlimited-with-requests-per-unit.yaml': [
    'unlimited-with-requests-per-unit.yaml:6:7: descriptors[0].rate_limit.requests_per_unit: unlimited: true takes no requests_per_unit; remove requests_per_unit, or remove unlimited to enforce a limit',
  ],
  'unlimited-not-boolean.yaml': ['unlimited-not-boolean.yaml:5:18: descriptors[0].rate_limit.unlimited: unlimited must be true or false, got "always"'],
  'shadow-mode-not-boolean.yaml': ['shadow-mode-not-boolean.yaml:4:18: descriptors[0].shadow_mode: shadow_mode must be true or false, got "sometimes"'],
  'replaces-self.yaml': [`replaces-self.yaml:9:17: descriptors[0].rate_limit.replaces[0].name: "per_user" is this limit's own name; a limit cannot replace itself`],
  'replaces-without-name.yaml': [
    'replaces-without-name.yaml:8:11: descriptors[0].rate_limit.replaces[0].limit: unknown key "limit"; a replaces entry has name',
    'replaces-without-name.yaml:8:11: descriptors[0].rate_limit.replaces[0].name: missing name: each replaces entry names the limit it replaces (- name: other_limit)',
  ],
  'replaces-empty-name.yaml': [
    'replaces-empty-name.yaml:8:17: descriptors[0].rate_limit.replaces[0].name: name must not be empty: write the name of the limit this one replaces',
  ],
  'share-threshold-without-wildcard.yaml': [
    'share-threshold-without-wildcard.yaml:5:22: descriptors[0].share_threshold: share_threshold: true needs a wildcard value (with "*", like value: files/*); this descriptor\'s value is "/api/orders"',
  ],
  'algorithm-unknown.yaml': [
    'algorithm-unknown.yaml:7:18: descriptors[0].rate_limit.algorithm: algorithm "token_bucket" is not one of token-bucket, leaky-bucket, fixed-window, sliding-log, sliding-window, gcra; did you mean "token-bucket"?',
  ],
  'burst-zero.yaml': ['burst-zero.yaml:8:14: descriptors[0].rate_limit.burst: burst must be a whole number ≥ 1, got 0'],
  'burst-fractional.yaml': ['burst-fractional.yaml:8:14: descriptors[0].rate_limit.burst: burst must be a whole number ≥ 1, got 12.5'],
  'unit-multiplier-zero.yaml': ['unit-multiplier-zero.yaml:7:24: descriptors[0].rate_limit.unit_multiplier: unit_multiplier must be a whole number ≥ 1, got 0'],
  'unit-multiplier-negative.yaml': ['unit-multiplier-negative.yaml:7:24: descriptors[0].rate_limit.unit_multiplier: unit_multiplier must be a whole number ≥ 1, got -3'],
  'soft-percent-above-1000.yaml': ['soft-percent-above-1000.yaml:7:21: descriptors[0].rate_limit.soft_percent: soft_percent must be a whole number from 0 to 1000, got 1500'],
  'soft-percent-fractional.yaml': ['soft-percent-fractional.yaml:7:21: descriptors[0].rate_limit.soft_percent: soft_percent must be a whole number from 0 to 1000, got 12.5'],
  'precision-zero.yaml': ['precision-zero.yaml:8:18: descriptors[0].rate_limit.precision: precision must be a whole number from 1 to 100, got 0'],
  'precision-above-100.yaml': ['precision-above-100.yaml:8:18: descriptors[0].rate_limit.precision: precision must be a whole number from 1 to 100, got 1000'],
  'precision-not-sliding-window.yaml': [
    'precision-not-sliding-window.yaml:7:7: descriptors[0].rate_limit.precision: precision applies to algorithm sliding-window only, not fixed-window; remove precision or set algorithm: sliding-window',
  ],
  'precision-local-first.yaml': [
    'precision-local-first.yaml:9:7: descriptors[0].rate_limit.sync_interval_ms: sync_interval_ms (local-first) syncs a two-window count; a sliding window of precision 10 cannot sync (remove precision, or use lease_size instead)',
  ],
  'cost-zero.yaml': ['cost-zero.yaml:7:13: descriptors[0].rate_limit.cost: cost must be a whole number ≥ 1, got 0'],
  'cost-negative.yaml': ['cost-negative.yaml:7:13: descriptors[0].rate_limit.cost: cost must be a whole number ≥ 1, got -1'],
  'deadline-zero.yaml': ['deadline-zero.yaml:7:20: descriptors[0].rate_limit.deadline_ms: deadline_ms must be a whole number from 1 to 60000, got 0'],
  'failure-mode-unknown.yaml': [
    'failure-mode-unknown.yaml:7:21: descriptors[0].rate_limit.failure_mode: failure_mode "fail-open" is not one of open, closed, local',
  ],
  'window-too-large.yaml': [
    'window-too-large.yaml:7:26: descriptors[0].rate_limit.requests_per_unit: requests_per_unit 1000000 per 100000 years is too large for sliding-window to count exactly: sliding-window needs requests_per_unit and capacity ≤ 2251799813685248, window ≤ 2251799813685248 ms; use a shorter window, or use fixed-window (the default) or sliding-log, which count any quota exactly',
  ],
  'burst-window-too-large.yaml': [
    'burst-window-too-large.yaml:9:14: descriptors[0].rate_limit.burst: burst 4000000 per 30 days is too large for token-bucket to count exactly: token-bucket needs requests_per_unit and capacity ≤ 2251799813685248, window ≤ 2251799813685248 ms and a bucket that fills within 2251799813685248 ms (capacity × window ≤ 2251799813685248 × requests_per_unit); lower the burst or use a shorter unit, or use fixed-window (the default) or sliding-log, which count any quota exactly',
  ],
  'alias-undefined.yaml': ['alias-undefined.yaml:4:17: descriptors[0].rate_limit: alias *standard names no anchor defined before it; define &standard first'],
  'alias-bomb.yaml': ['alias-bomb.yaml:3:8: aliases expand this document more than 10000 times over (an alias bomb?); write the rules out or use fewer aliases'],
  'several-errors.yaml': [
    'several-errors.yaml:5:13: descriptors[0].rate_limit.unit: unit "fortnight" is not one of second, minute, hour, day, week, month, year',
    'several-errors.yaml:8:18: descriptors[1].shadow_mode: shadow_mode must be true or false, got "maybe"',
    'several-errors.yaml:11:26: descriptors[1].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got -1',
  ],
};

describe('invalid rules: one fixture per mistake, exact errors', () => {
  it('every fixture in invalid/ is in the table and every table entry has a fixture', () => {
    expect(readdirSync(new URL('invalid/', fixtures)).sort()).toEqual(Object.keys(INVALID).sort());
  });

  it.each(Object.entries(INVALID))('%s', (file, expected) => {
    const text = fixture('invalid', file);
    const { domains, errors } = checkRules(text, file);
    expect(errors.map((error) => error.message)).toEqual(expected);
    expect(domains).toEqual([]);

    let thrown: unknown;
    try {
      parseRules(text, file);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(RulesError);
    const error = thrown as RulesError;
    expect(error.code).toBe('ERR_TOLLGATE_INVALID_RULES');
    expect(error.message).toBe(expected[0]);
    const [, line, column] = /^[^:]+:(\d+):(\d+): /.exec(expected[0]!)!;
    expect([error.file, error.line, error.column]).toEqual([file, Number(line), Number(column)]);
  });

  it('reports the same line and column with Windows line endings', () => {
    const text = fixture('invalid', 'several-errors.yaml').replace(/\n/g, '\r\n');
    expect(checkRules(text, 'several-errors.yaml').errors.map((error) => error.message)).toEqual(INVALID['several-errors.yaml']);
  });

  it('stops collecting after 100 errors', () => {
    const lines = ['domain: many_mistakes', 'descriptors:'];
    for (let index = 0; index < 150; index++) lines.push(`  - { key: k${index}, shadow_mode: perhaps }`);
    const { errors } = checkRules(lines.join('\n'), 'many.yaml');
    expect(errors).toHaveLength(RULES_LIMITS.maxErrors);
    expect(errors[99]!.message).toBe('many.yaml:102:30: descriptors[99].shadow_mode: shadow_mode must be true or false, got "perhaps"');
  });
});

describe('limits', () => {
  it('refuses text over 1 MiB before parsing it', () => {
    // Not YAML at all past the first line: had it been parsed, the error would be a syntax error.
    const text = `domain: big\nfoo: [\n# ${'x'.repeat(RULES_LIMITS.maxBytes)}\n`;
    expect(() => parseRules(text, 'big.yaml')).toThrow(
      `big.yaml:1:1: ${Buffer.byteLength(text)} bytes is over the limit of 1048576 bytes (1 MiB) for one rules source; split the domains across several files`,
    );
  });

  it('counts the size in bytes, not characters', () => {
    const padding = RULES_LIMITS.maxBytes - 'domain: é\n# \n'.length; // é is 2 bytes: 1 byte over
    expect(checkRules(`domain: é\n# ${'x'.repeat(padding)}\n`, 'utf8.yaml').errors[0]?.message).toMatch(/^utf8\.yaml:1:1: 1048577 bytes is over/);
  });

  it('accepts descriptors nested exactly 64 deep', () => {
    let text = 'domain: deep\ndescriptors: ';
    for (let level = 1; level <= RULES_LIMITS.maxDescriptorDepth; level++) text += `[{ key: level${level}, descriptors: `;
    text += `[]${' }]'.repeat(RULES_LIMITS.maxDescriptorDepth)}\n`;
    const [domain] = parseRules(text, 'deep.yaml');
    let depth = 0;
    for (let level: readonly DescriptorConfig[] = domain!.descriptors; level.length > 0; level = level[0]!.descriptors) depth++;
    expect(depth).toBe(64);
  });

  it('accepts exactly 100,000 descriptors in a domain (built with an alias)', () => {
    const children = Array.from({ length: 99 }, (_, index) => `{ key: child${index} }`).join(', ');
    const lines = ['domain: wide', 'descriptors:', `  - { key: template, descriptors: &children [${children}] }`];
    for (let index = 0; index < 999; index++) lines.push(`  - { key: parent${index}, descriptors: *children }`);
    const [domain] = parseRules(lines.join('\n'), 'wide.yaml');
    expect(countDescriptors(domain!.descriptors)).toBe(RULES_LIMITS.maxDescriptorsPerDomain);
  });

  it('fails an alias bomb fast', () => {
    const started = performance.now();
    expect(checkRules(fixture('invalid', 'alias-bomb.yaml'), 'bomb.yaml').errors).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('refuses YAML nested a million levels deep quickly, without building it', () => {
    const text = `domain: deep\ndescriptors: ${'['.repeat(RULES_LIMITS.maxBytes - 100)}`;
    const started = performance.now();
    expect(checkRules(text, 'deep.yaml').errors.map((error) => error.message)).toEqual(['deep.yaml:2:269: YAML nested deeper than 256 levels; flatten the rules']);
    expect(performance.now() - started).toBeLessThan(500);
  });
});

// ---- valid fixtures ------------------------------------------------------------------------

type LimitFields = Partial<RateLimitConfig> & Pick<RateLimitConfig, 'location'>;
type DescriptorFields = Partial<DescriptorConfig> & Pick<DescriptorConfig, 'key' | 'location'>;

/** Builders that fill in the defaults, so each expectation lists only what the YAML says. */
function fixtureTree(file: string) {
  const at = (line: number, column: number) => ({ file, line, column });
  const limit = (fields: Omit<LimitFields, 'location'>, line: number, column: number): RateLimitConfig => ({
    unitMultiplier: 1,
    unlimited: false,
    replaces: [],
    algorithm: 'fixed-window',
    softPercent: 0,
    ...fields,
    location: at(line, column),
  });
  const descriptor = (fields: Omit<DescriptorFields, 'location'>, line: number, column: number): DescriptorConfig => ({
    shadowMode: false,
    detailedMetric: false,
    valueToMetric: false,
    quotaMode: false,
    shareThreshold: false,
    descriptors: [],
    ...fields,
    location: at(line, column),
  });
  const domain = (name: string, descriptors: DescriptorConfig[]): DomainConfig => ({ domain: name, descriptors, source: file });
  return { limit, descriptor, domain };
}

const VALID: Record<string, (tree: ReturnType<typeof fixtureTree>) => DomainConfig[]> = {
  'envoy-nested-defaults.yaml': ({ domain, descriptor, limit }) => [
    domain('notifications', [
      descriptor(
        {
          key: 'push_kind',
          value: 'promotional',
          descriptors: [descriptor({ key: 'device_id', rateLimit: limit({ unit: 'day', requestsPerUnit: 3 }, 10, 9) }, 9, 9)],
        },
        6,
        5,
      ),
      descriptor({ key: 'device_id', rateLimit: limit({ unit: 'day', requestsPerUnit: 50 }, 16, 5) }, 15, 5),
      descriptor({ key: 'device_id', value: 'test-device-0', rateLimit: limit({ unit: 'day', requestsPerUnit: 0 }, 23, 5) }, 21, 5),
    ]),
  ],
  'envoy-features.yaml': ({ domain, descriptor, limit }) => [
    domain('storefront', [
      descriptor({ key: 'internal_service', rateLimit: limit({ unlimited: true }, 6, 5) }, 5, 5),
      descriptor({ key: 'path', value: '/images/*', shareThreshold: true, rateLimit: limit({ unit: 'minute', requestsPerUnit: 600 }, 12, 5) }, 9, 5),
      descriptor(
        {
          key: 'path',
          value: '/api/*',
          valueToMetric: true,
          descriptors: [descriptor({ key: 'customer', detailedMetric: true, rateLimit: limit({ unit: 'second', requestsPerUnit: 20 }, 22, 9) }, 20, 9)],
        },
        16,
        5,
      ),
      descriptor(
        {
          key: 'region',
          value: 'eu',
          descriptors: [
            descriptor({ key: 'customer', value: 'acme', shadowMode: true, rateLimit: limit({ name: 'acme_eu', unit: 'second', requestsPerUnit: 5 }, 32, 9) }, 29, 9),
          ],
        },
        26,
        5,
      ),
      descriptor(
        {
          key: 'plan',
          value: 'gold',
          descriptors: [
            descriptor(
              { key: 'customer', value: 'acme', quotaMode: true, rateLimit: limit({ replaces: ['acme_eu'], unit: 'second', requestsPerUnit: 50 }, 43, 9) },
              40,
              9,
            ),
          ],
        },
        37,
        5,
      ),
    ]),
  ],
  'tollgate-extensions.yaml': ({ domain, descriptor, limit }) => [
    domain('payments', [
      descriptor(
        {
          key: 'api_key',
          rateLimit: limit(
            { unit: 'hour', unitMultiplier: 3, requestsPerUnit: 300, algorithm: 'token-bucket', burst: 50, softPercent: 10, failureMode: 'closed', cost: 2 },
            6,
            5,
          ),
        },
        5,
        5,
      ),
      descriptor({ key: 'card_check', rateLimit: limit({ unit: 'week', requestsPerUnit: 1000, algorithm: 'sliding-window', failureMode: 'local', deadlineMs: 20 }, 17, 5) }, 16, 5),
      descriptor({ key: 'refund', rateLimit: limit({ unit: 'month', requestsPerUnit: 100, algorithm: 'gcra' }, 25, 5) }, 24, 5),
    ]),
  ],
  'multi-document.yaml': ({ domain, descriptor, limit }) => [
    domain('search', [descriptor({ key: 'remote_address', rateLimit: limit({ unit: 'second', requestsPerUnit: 10 }, 6, 5) }, 5, 5)]),
    domain('login', [descriptor({ key: 'username', rateLimit: limit({ unit: 'minute', requestsPerUnit: 5, algorithm: 'sliding-log' }, 11, 5) }, 10, 5)]),
  ],
  'yaml-features.yaml': ({ domain, descriptor, limit }) => [
    domain('uploads', [
      descriptor({ key: 'status', value: '200', shadowMode: true, rateLimit: limit({ unit: 'minute', requestsPerUnit: 100 }, 8, 5) }, 5, 5),
      descriptor({ key: 'country', value: 'NO', rateLimit: limit({ unit: 'minute', requestsPerUnit: 100 }, 14, 5) }, 12, 5),
      descriptor({ key: 'tenant', rateLimit: limit({ unit: 'minute', requestsPerUnit: 1000 }, 17, 5) }, 16, 5),
      descriptor({ key: 'bucket' }, 21, 5),
    ]),
  ],
};

describe('valid rules: each fixture parses into its tree', () => {
  it('every fixture in valid/ is in the table and every table entry has a fixture', () => {
    expect(readdirSync(new URL('valid/', fixtures)).sort()).toEqual(Object.keys(VALID).sort());
  });

  it.each(Object.entries(VALID))('%s', (file, expected) => {
    const parsed = parseRules(fixture('valid', file), file);
    expect(parsed).toStrictEqual(expected(fixtureTree(file)));
  });

  it('returns a frozen tree', () => {
    const [domain] = parseRules(fixture('valid', 'envoy-features.yaml'), 'envoy-features.yaml');
    const nested = domain!.descriptors[4]!.descriptors[0]!;
    for (const part of [domain, domain!.descriptors, nested, nested.rateLimit, nested.rateLimit!.replaces, nested.location]) {
      expect(Object.isFrozen(part)).toBe(true);
    }
  });

  it('knows where each domain was named', () => {
    const domains = parseRules(fixture('valid', 'multi-document.yaml'), 'rules/multi.yaml');
    expect(domains.map(domainLocation)).toEqual([
      { file: 'rules/multi.yaml', line: 3, column: 9 },
      { file: 'rules/multi.yaml', line: 8, column: 9 },
    ]);
  });
});
