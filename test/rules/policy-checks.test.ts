/**
 * The rules loader checks a limit's numbers with the engine's own checks (policy.ts), so a rule
 * loads exactly when its policy compiles, and the error points at the YAML field at fault.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS, POLICY_RANGES, compilePolicy, type AlgorithmName } from '../../src/policy.js';
import { checkRules } from '../../src/rules/parse/index.js';

const YEAR_MS = 31_536_000_000;
const UINT32 = 4_294_967_295;
/** The largest capacity the plain arithmetic counts over a year: (capacity + 1) × year ≤ 2^53 − 1. */
const MAX_PLAIN_YEARLY = Math.floor(Number.MAX_SAFE_INTEGER / YEAR_MS) - 1;
/** Past it (wide policies), limit and capacity ≤ 2^51, and a bucket must fill within 2^51 ms. */
const WIDE = 2 ** 51;
/** The largest burst a bucket of 100 per year may have: it fills within 2^51 ms. */
const MAX_WIDE_BURST_100 = Number((2n ** 51n * 100n) / BigInt(YEAR_MS));

interface Numbers {
  readonly requestsPerUnit: number;
  readonly burst?: number;
  readonly softPercent?: number;
  /** Years (default 1). */
  readonly unitMultiplier?: number;
}

function rule(algorithm: AlgorithmName, { requestsPerUnit, burst, softPercent, unitMultiplier }: Numbers): string {
  const extra = `${burst === undefined ? '' : `, burst: ${burst}`}${softPercent === undefined ? '' : `, soft_percent: ${softPercent}`}${unitMultiplier === undefined ? '' : `, unit_multiplier: ${unitMultiplier}`}`;
  return `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: year, requests_per_unit: ${requestsPerUnit}, algorithm: ${algorithm}${extra} }\n`;
}

function compiles(algorithm: AlgorithmName, { requestsPerUnit, burst, softPercent, unitMultiplier = 1 }: Numbers): boolean {
  try {
    compilePolicy({ algorithm, limit: requestsPerUnit, window: YEAR_MS * unitMultiplier, ...(burst === undefined ? {} : { burst }), ...(softPercent === undefined ? {} : { softPercent }) });
    return true;
  } catch {
    return false;
  }
}

const CASES: Numbers[] = [
  { requestsPerUnit: MAX_PLAIN_YEARLY },
  { requestsPerUnit: MAX_PLAIN_YEARLY + 1 },
  { requestsPerUnit: UINT32 },
  { requestsPerUnit: UINT32, burst: UINT32, softPercent: POLICY_RANGES.softPercent.max },
  { requestsPerUnit: 1, burst: MAX_PLAIN_YEARLY },
  { requestsPerUnit: 1, burst: MAX_PLAIN_YEARLY + 1 },
  { requestsPerUnit: 100, burst: MAX_WIDE_BURST_100 },
  { requestsPerUnit: 100, burst: MAX_WIDE_BURST_100 + 1 },
  { requestsPerUnit: 10, unitMultiplier: 10_000, softPercent: 1000 },
  { requestsPerUnit: 10, unitMultiplier: 10_000 },
  { requestsPerUnit: 10, burst: 10, unitMultiplier: 100_000 },
  { requestsPerUnit: 10, burst: 10, unitMultiplier: 50_000 },
  { requestsPerUnit: 0 },
  { requestsPerUnit: 10, burst: POLICY_RANGES.burst.min - 1 },
  { requestsPerUnit: 10, softPercent: POLICY_RANGES.softPercent.max },
  { requestsPerUnit: 10, softPercent: POLICY_RANGES.softPercent.max + 1 },
];

describe('the loader and the engine agree on the numbers of a limit', () => {
  for (const algorithm of ALGORITHMS) {
    it.each(CASES)(`${algorithm} %o loads exactly when its policy compiles`, (numbers) => {
      const { errors } = checkRules(rule(algorithm, numbers), 'r.yaml');
      expect(errors.length === 0).toBe(compiles(algorithm, numbers));
    });
  }

  it('points at burst when burst sets the capacity, else at requests_per_unit', () => {
    const at = (algorithm: AlgorithmName, numbers: Numbers) => checkRules(rule(algorithm, numbers), 'r.yaml').errors.map((error) => error.path);
    expect(at('token-bucket', { requestsPerUnit: 100, burst: MAX_WIDE_BURST_100 + 1 })).toEqual(['descriptors[0].rate_limit.burst']);
    expect(at('token-bucket', { requestsPerUnit: 10, unitMultiplier: 10_000, softPercent: 1000 })).toEqual(['descriptors[0].rate_limit.requests_per_unit']);
    expect(at('sliding-window', { requestsPerUnit: 10, burst: 10, unitMultiplier: 100_000 })).toEqual(['descriptors[0].rate_limit.requests_per_unit']);
  });

  it('accepts every uint32 quota, burst and soft percent with every algorithm; refuses only past the stated bound', () => {
    for (const algorithm of ALGORITHMS) {
      expect(compiles(algorithm, { requestsPerUnit: UINT32, burst: UINT32, softPercent: 1000 }), algorithm).toBe(true);
      expect(compiles(algorithm, { requestsPerUnit: MAX_PLAIN_YEARLY + 1 }), algorithm).toBe(true);
      expect(compiles(algorithm, { requestsPerUnit: WIDE + 1 }), algorithm).toBe(algorithm === 'fixed-window' || algorithm === 'sliding-log');
    }
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'gcra'] as const) {
      // Up to the plain bound a slow bucket is counted in plain integers; past it, it must fill within 2^51 ms.
      expect(compiles(algorithm, { requestsPerUnit: 1, burst: MAX_PLAIN_YEARLY })).toBe(true);
      expect(compiles(algorithm, { requestsPerUnit: 1, burst: MAX_PLAIN_YEARLY + 1 })).toBe(false);
      expect(compiles(algorithm, { requestsPerUnit: 100, burst: MAX_WIDE_BURST_100 })).toBe(true);
      expect(compiles(algorithm, { requestsPerUnit: 100, burst: MAX_WIDE_BURST_100 + 1 })).toBe(false);
    }
  });
});
