/** `loadRules(path)`: a rules file or directory, validated and compiled. */
import { RulesError } from '../errors.js';
import { readRuleSources, type RulesText } from './files.js';
import { duplicateDomainErrors, parseRules } from './parse.js';
import { compileRules, type RuleSet } from './ruleset.js';
import type { DomainConfig } from './types.js';

/**
 * Loads, validates and compiles the rules at `path` (a YAML file, or a directory of them).
 * Rejects with a {@link RulesError} (`file:line:col: path: what to fix`) on the first problem.
 */
export async function loadRules(path: string): Promise<RuleSet> {
  const sources = await readRuleSources(path);
  // Versioned by the source texts, as hot reload versions them: one file, one version.
  return compileRules(parseRuleSources(sources), sources.map((source) => source.text));
}

/** Parses already-read sources (hot reload) and refuses a domain defined twice. */
export function parseRuleSources(sources: readonly RulesText[]): DomainConfig[] {
  const domains = sources.flatMap(({ source, text }) => parseRules(text, source));
  const duplicate: RulesError | undefined = duplicateDomainErrors(domains)[0];
  if (duplicate !== undefined) throw duplicate;
  return domains;
}
