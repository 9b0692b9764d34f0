/**
 * The rules one simulation run decides with: the loaded domains, with every limit's algorithm
 * replaced when the run asks for one, and what the report says of each limit (its path, its
 * quota in words, its algorithm). Token leases and local-first counting are left out: they trade
 * exactness for fewer store calls, which a single offline process does not need.
 */
import { InvalidOptionError } from '../errors.js';
import type { AlgorithmName } from '../policy.js';
import { compileRules, type RuleSet } from '../rules/ruleset.js';
import type { DescriptorConfig, DomainConfig, RateLimitConfig } from '../rules/types.js';
import { describeWindow, ruleWindowMs } from '../units.js';

/** What the report says of a limit. */
export interface LimitInfo {
  readonly domain: string;
  readonly limit: string;
  readonly algorithm: AlgorithmName;
  readonly shadowMode: boolean;
}

/**
 * What a run puts every limit on: an algorithm, and optionally more `rate_limit` fields (in the
 * loaded form, e.g. `{ burst: 20 }`), so variants of one algorithm can be compared side by side.
 * `label` names the run in the report (default: the algorithm).
 */
export interface RunVariant {
  readonly algorithm: AlgorithmName;
  readonly label?: string;
  readonly rateLimit?: Readonly<Record<string, unknown>>;
}

/** The rules of a run, compiled, and each limit's description by its path (`domain.key=value`). */
export interface RunRules {
  readonly ruleSet: RuleSet;
  readonly limits: ReadonlyMap<string, LimitInfo>;
}

/** The rules with every limit on `variant` (undefined: as written). */
export function rulesForRun(domains: readonly DomainConfig[], variant: RunVariant | undefined): RunRules {
  const limits = new Map<string, LimitInfo>();
  const rewritten = domains.map((domain) => ({ ...domain, descriptors: domain.descriptors.map((d) => rewrite(d, domain.domain, domain.domain, variant, limits)) }));
  try {
    return { ruleSet: compileRules(rewritten), limits };
  } catch (error) {
    throw new InvalidOptionError(`simulate: run ${variant?.label ?? variant?.algorithm}: ${(error as Error).message}`);
  }
}

function rewrite(descriptor: DescriptorConfig, domain: string, parentPath: string, variant: RunVariant | undefined, limits: Map<string, LimitInfo>): DescriptorConfig {
  const path = `${parentPath}.${descriptor.key}${descriptor.value === undefined ? '' : `=${descriptor.value}`}`;
  let rateLimit: RateLimitConfig | undefined = descriptor.rateLimit;
  if (rateLimit !== undefined) {
    const exact: RateLimitConfig = { ...rateLimit };
    delete (exact as { leaseSize?: number }).leaseSize;
    delete (exact as { syncIntervalMs?: number }).syncIntervalMs;
    // quota_mode counts every hit, which only fixed-window can: those limits keep their algorithm.
    rateLimit = variant === undefined || descriptor.quotaMode ? exact : onVariant(exact, variant);
    if (!rateLimit.unlimited && rateLimit.unit !== undefined && rateLimit.requestsPerUnit !== undefined) {
      const window = describeWindow(ruleWindowMs(rateLimit.unit, rateLimit.unitMultiplier));
      limits.set(path, { domain, limit: `${rateLimit.requestsPerUnit} per ${window}`, algorithm: rateLimit.algorithm, shadowMode: descriptor.shadowMode });
    }
  }
  const descriptors = descriptor.descriptors.map((child) => rewrite(child, domain, path, variant, limits));
  return { ...descriptor, ...(rateLimit === undefined ? {} : { rateLimit }), descriptors };
}

/**
 * A limit moved onto the run's algorithm. A sliding-window `precision` belongs to that algorithm
 * alone, so it is dropped when the run compares another one (the variant may set its own).
 */
function onVariant(rateLimit: RateLimitConfig, variant: RunVariant): RateLimitConfig {
  const moved: RateLimitConfig = { ...rateLimit };
  if (variant.algorithm !== 'sliding-window') delete (moved as { precision?: number }).precision;
  return { ...moved, ...variant.rateLimit, algorithm: variant.algorithm };
}
