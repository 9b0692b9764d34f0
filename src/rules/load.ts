/** `loadRules(path)`: a rules file or directory, validated and compiled. */
import { RulesError } from '../errors.js';
import { readRuleSources, type RulesText } from './files.js';
import { combineDomains, parseRules, type DomainMergeOptions } from './parse/index.js';
import { compileRules, type RuleSet } from './ruleset.js';
import type { DescriptorConfig, DomainConfig, RateLimitConfig } from './types.js';

/** Options of loading rules: merging domains, and the limits the store cannot keep. */
export interface RuleLoadOptions extends DomainMergeOptions {
  /**
   * Why the store cannot keep a limit, naming the alternative (undefined: it can): a rule with
   * such a limit is refused at load, at its file:line, rather than answered 400 on every check.
   */
  readonly refuse?: ((limit: RateLimitConfig) => string | undefined) | undefined;
}

/**
 * Loads, validates and compiles the rules at `path` (a YAML file, or a directory of them).
 * Rejects with a {@link RulesError} (`file:line:col: path: what to fix`) on the first problem.
 */
export async function loadRules(path: string, options: RuleLoadOptions = {}): Promise<RuleSet> {
  const sources = await readRuleSources(path);
  // Versioned by the source texts, as hot reload versions them: one file, one version.
  return compileRules(parseRuleSources(sources, options), sources.map((source) => source.text));
}

/**
 * Parses already-read sources (hot reload). A domain defined twice is refused, or with
 * `mergeDomains` merged (envoy's MERGE_DOMAIN_CONFIG).
 */
export function parseRuleSources(sources: readonly RulesText[], options: RuleLoadOptions = {}): DomainConfig[] {
  const { domains, errors } = combineDomains(
    sources.flatMap(({ source, text }) => parseRules(text, source)),
    options,
  );
  const first: RulesError | undefined = errors[0];
  if (first !== undefined) throw first;
  if (options.refuse !== undefined) for (const domain of domains) refuseLimits(domain.descriptors, 'descriptors', options.refuse);
  return domains;
}

/** Throws a RulesError at the first descriptor whose limit `refuse` refuses. */
function refuseLimits(descriptors: readonly DescriptorConfig[], path: string, refuse: (limit: RateLimitConfig) => string | undefined): void {
  for (const [index, descriptor] of descriptors.entries()) {
    const at = `${path}[${index}]`;
    const why = descriptor.rateLimit === undefined || descriptor.rateLimit.unlimited ? undefined : refuse(descriptor.rateLimit);
    if (why !== undefined) {
      const { file, line, column } = descriptor.location;
      throw new RulesError(file, line, column, `${at}.rate_limit`, `${why} (this store cannot keep the rule for ${descriptor.key}${descriptor.value === undefined ? '' : `=${descriptor.value}`}: change it, or start with a store that keeps it)`);
    }
    refuseLimits(descriptor.descriptors, `${at}.descriptors`, refuse);
  }
}
