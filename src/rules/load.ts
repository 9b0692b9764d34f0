/** `loadRules(path)`: a rules file or directory, validated and compiled. */
import { RulesError } from '../errors.js';
import { readRuleSources } from './files.js';
import { parseRules } from './parse.js';
import { compileRules, type RuleSet } from './ruleset.js';
import type { DomainConfig } from './types.js';

/**
 * Loads, validates and compiles the rules at `path` (a YAML file, or a directory of them).
 * Rejects with a {@link RulesError} (`file:line:col: path: what to fix`) on the first problem.
 */
export async function loadRules(path: string): Promise<RuleSet> {
  const sources = await readRuleSources(path);
  return compileRules(parseRuleSources(sources), sources.map((source) => source.text));
}

/** Parses every source and refuses a domain defined twice. */
export function parseRuleSources(sources: readonly { source: string; text: string }[]): DomainConfig[] {
  const domains: DomainConfig[] = [];
  const seen = new Map<string, DomainConfig>();
  for (const { source, text } of sources) {
    for (const domain of parseRules(text, source)) {
      const earlier = seen.get(domain.domain);
      if (earlier !== undefined) {
        throw new RulesError(domain.source, 1, 1, 'domain', `domain ${JSON.stringify(domain.domain)} is already defined in ${earlier.source}; each domain must be defined once`);
      }
      seen.set(domain.domain, domain);
      domains.push(domain);
    }
  }
  return domains;
}
