/** `loadRules(path)`: a rules file or directory, validated and compiled. */
import { RulesError } from '../errors.js';
import { readRuleSources, type RulesText } from './files.js';
import { combineDomains, parseRules, type DomainMergeOptions } from './parse/index.js';
import { compileRules, type RuleSet } from './ruleset.js';
import type { DomainConfig } from './types.js';

/**
 * Loads, validates and compiles the rules at `path` (a YAML file, or a directory of them).
 * Rejects with a {@link RulesError} (`file:line:col: path: what to fix`) on the first problem.
 */
export async function loadRules(path: string, options: DomainMergeOptions = {}): Promise<RuleSet> {
  const sources = await readRuleSources(path);
  // Versioned by the source texts, as hot reload versions them: one file, one version.
  return compileRules(parseRuleSources(sources, options), sources.map((source) => source.text));
}

/**
 * Parses already-read sources (hot reload). A domain defined twice is refused, or with
 * `mergeDomains` merged (envoy's MERGE_DOMAIN_CONFIG).
 */
export function parseRuleSources(sources: readonly RulesText[], options: DomainMergeOptions = {}): DomainConfig[] {
  const { domains, errors } = combineDomains(
    sources.flatMap(({ source, text }) => parseRules(text, source)),
    options,
  );
  const first: RulesError | undefined = errors[0];
  if (first !== undefined) throw first;
  return domains;
}
