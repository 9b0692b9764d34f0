/**
 * Rules on disk: one file, or a directory of `*.yaml` / `*.yml` / `*.json` files (sorted by name,
 * not recursive, dotfiles ignored, as envoy's runtime loader can be told to; JSON is read as the
 * YAML it also is). loadRules, watchRules and `tollgate validate` all list files here, so they
 * agree on which files count. Sizes are checked before reading, so an oversized file is refused
 * without being loaded into memory.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { RulesError } from '../errors.js';
import { checkRules, combineDomains } from './parse/index.js';
import type { DomainMergeOptions, RulesCheck } from './parse/index.js';
import { RULES_LIMITS, sizeProblem } from './parse/yaml.js';
import type { DomainConfig } from './types.js';

/** The text of one rules file and the name errors give it (its path). */
export interface RulesText {
  readonly source: string;
  readonly text: string;
}

const RULES_FILE = /\.(ya?ml|json)$/i;

/**
 * Reads the rules at `path`: the file itself, or every `*.yaml` / `*.yml` / `*.json` file directly
 * in the directory, sorted by name (dotfiles ignored). Each `source` is `path` joined with the name.
 *
 * @throws {RulesError} when `path` cannot be read, holds no rules files, or a file is over
 *   {@link RULES_LIMITS}.maxBytes.
 */
export async function readRuleSources(path: string): Promise<RulesText[]> {
  const sources: RulesText[] = [];
  for (const file of await ruleFiles(path)) sources.push(await readRulesFile(file));
  return sources;
}

/**
 * What the rules files at `path` look like from outside (which files, and each one's device,
 * inode, size, modification and change times), as a string: when it stays the same, the files did
 * not change. Never throws: a path that cannot be read gives a signature naming the problem.
 */
export async function rulesSignature(path: string): Promise<string> {
  let files: string[];
  try {
    files = await ruleFiles(path);
  } catch (error) {
    return `unreadable: ${(error as Error).message}`;
  }
  const parts: string[] = [];
  for (const file of files) {
    const info = await stat(file, { bigint: true }).catch(() => undefined);
    parts.push(info === undefined ? `${file} gone` : `${file} ${info.dev}:${info.ino} ${info.size} ${info.mtimeNs} ${info.ctimeNs}`);
  }
  return parts.join('\n');
}

/** The file itself, or the rules files directly in the directory, sorted by name. */
async function ruleFiles(path: string): Promise<string[]> {
  const info = await stat(path).catch((error: unknown) => {
    throw unreadable(path, error);
  });
  if (!info.isDirectory()) return [path];
  const names = await readdir(path).catch((error: unknown) => {
    throw unreadable(path, error);
  });
  const files: string[] = [];
  for (const name of names.filter((name) => !name.startsWith('.') && RULES_FILE.test(name)).sort()) {
    const file = join(path, name);
    if ((await stat(file).catch(() => undefined))?.isFile() === true) files.push(file);
  }
  // A wrong path would otherwise load no rules at all and silently limit nothing.
  if (files.length === 0) throw new RulesError(path, 1, 1, '', 'no rules files here: a rules directory needs at least one *.yaml, *.yml or *.json file');
  return files;
}

async function readRulesFile(file: string): Promise<RulesText> {
  try {
    const { size } = await stat(file);
    if (size > RULES_LIMITS.maxBytes) throw new RulesError(file, 1, 1, '', sizeProblem(size));
    return { source: file, text: await readFile(file, 'utf8') };
  } catch (error) {
    throw error instanceof RulesError ? error : unreadable(file, error);
  }
}

function unreadable(path: string, error: unknown): RulesError {
  const code = (error as NodeJS.ErrnoException).code;
  const reason = code === 'ENOENT' ? 'no such file or directory' : code === 'EACCES' ? 'permission denied' : (error as Error).message;
  return new RulesError(path, 1, 1, '', `cannot read rules: ${reason}`);
}

/**
 * Reads and checks every rules file at `path`, collecting all errors: each file's problems, and
 * each domain defined in more than one file (unless `mergeDomains`). Reading problems (missing path, oversized file) are
 * returned as errors too.
 */
export async function checkRuleFiles(path: string, options: DomainMergeOptions = {}): Promise<RulesCheck> {
  let sources: RulesText[];
  try {
    sources = await readRuleSources(path);
  } catch (error) {
    if (error instanceof RulesError) return { domains: [], errors: [error] };
    throw error;
  }
  const domains: DomainConfig[] = [];
  const errors: RulesError[] = [];
  for (const { source, text } of sources) {
    const check = checkRules(text, source);
    domains.push(...check.domains);
    errors.push(...check.errors);
  }
  const combined = combineDomains(domains, options);
  errors.push(...combined.errors);
  return { domains: errors.length > 0 ? [] : combined.domains, errors };
}

/**
 * Reads and parses every rules file at `path` into domains, refusing a domain defined twice
 * (the error names both files and lines).
 *
 * @throws {RulesError} the first problem found.
 */
export async function loadDomainConfigs(path: string, options: DomainMergeOptions = {}): Promise<DomainConfig[]> {
  const { domains, errors } = await checkRuleFiles(path, options);
  if (errors.length > 0) throw errors[0];
  return [...domains];
}
