/**
 * The rules loader checks a limit's numbers with the engine's own checks (policy.ts), so a rule
 * loads exactly when its policy compiles, and the error points at the YAML field at fault.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS, POLICY_RANGES, compilePolicy, type AlgorithmName } from '../../src/policy.js';
import { checkRules } from '../../src/rules/parse.js';

const YEAR_MS = 31_536_000_000;
/** The largest capacity that counts exactly over a year. */
const MAX_YEARLY = Math.floor(Number.MAX_SAFE_INTEGER / YEAR_MS) - 1;

interface Numbers {
  readonly requestsPerUnit: number;
  readonly burst?: number;
  readonly softPercent?: number;
}

function rule(algorithm: AlgorithmName, { requestsPerUnit, burst, softPercent }: Numbers): string {
  const extra = `${burst === undefined ? '' : `, burst: ${burst}`}${softPercent === undefined ? '' : `, soft_percent: ${softPercent}`}`;
  return `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: year, requests_per_unit: ${requestsPerUnit}, algorithm: ${algorithm}${extra} }\n`;
}

function compiles(algorithm: AlgorithmName, { requestsPerUnit, burst, softPercent }: Numbers): boolean {
  try {
    compilePolicy({ algorithm, limit: requestsPerUnit, window: YEAR_MS, ...(burst === undefined ? {} : { burst }), ...(softPercent === undefined ? {} : { softPercent }) });
    return true;
  } catch {
    return false;
  }
}

const CASES: Numbers[] = [
  { requestsPerUnit: MAX_YEARLY },
  { requestsPerUnit: MAX_YEARLY + 1 },
  { requestsPerUnit: 10, burst: MAX_YEARLY + 1 },
  { requestsPerUnit: MAX_YEARLY + 1, burst: 10 },
  { requestsPerUnit: MAX_YEARLY, softPercent: 10 },
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
    expect(at('token-bucket', { requestsPerUnit: 10, burst: MAX_YEARLY + 1 })).toEqual(['descriptors[0].rate_limit.burst']);
    expect(at('token-bucket', { requestsPerUnit: MAX_YEARLY + 1 })).toEqual(['descriptors[0].rate_limit.requests_per_unit']);
    expect(at('sliding-window', { requestsPerUnit: MAX_YEARLY + 1, burst: 10 })).toEqual(['descriptors[0].rate_limit.requests_per_unit']);
  });
});
