/**
 * The rules loader: YAML text (one or more `---`-separated documents, one domain each, in
 * envoyproxy/ratelimit's format plus Tollgate's additions) to a validated, frozen
 * `DomainConfig` tree. Every problem is a `RulesError` at `file:line:col` with the path of the
 * field at fault and what to fix; one pass reports all of them.
 */
import { LineCounter } from 'yaml';
import { RulesError } from '../../errors.js';
import { DocumentReader, readText, reportMissing } from './fields.js';
import type { FieldSet } from './fields.js';
import { readDescriptorList } from './descriptor.js';
import { readList } from './lists.js';
import { Problems, RULES_LIMITS, StopReading, offsetOf, parseYamlDocuments, sizeProblem } from './yaml.js';
import type { YamlDocument } from './yaml.js';
import type { DescriptorConfig, DomainConfig, SourceLocation } from '../types.js';

export { RULES_LIMITS } from './yaml.js';

/** What checking a rules source found: its domains when it has no errors, else its errors. */
export interface RulesCheck {
  /** Empty when there are errors: a source with any error loads nothing. */
  readonly domains: readonly DomainConfig[];
  /** In source order; at most {@link RULES_LIMITS}.maxErrors per source. */
  readonly errors: readonly RulesError[];
}

const IN_DESCRIPTOR = 'belongs in a descriptor (an item of descriptors), not at the top of the document';

const DOCUMENT_FIELDS: FieldSet = {
  what: 'a domain document',
  names: ['domain', 'descriptors', 'allow', 'deny'],
  misplaced: Object.fromEntries(
    ['key', 'value', 'rate_limit', 'shadow_mode', 'detailed_metric', 'value_to_metric', 'quota_mode', 'share_threshold', 'metadata'].map((name) => [name, IN_DESCRIPTOR]),
  ),
};

/** Where each domain's name was written, for "already defined at" messages across sources. */
const domainLocations = new WeakMap<DomainConfig, SourceLocation>();

/**
 * Parses and validates rules. `source` names the text in error messages (usually its file path).
 * Returns one frozen `DomainConfig` per YAML document (empty documents are skipped).
 *
 * @throws {RulesError} the first problem found; use {@link checkRules} to get all of them.
 */
export function parseRules(text: string, source: string): DomainConfig[] {
  const { domains, errors } = checkRules(text, source);
  if (errors.length > 0) throw errors[0];
  return [...domains];
}

/**
 * Like {@link parseRules}, but returns every problem instead of throwing the first. Inputs past
 * {@link RULES_LIMITS} (size, nesting, alias expansion, descriptor count) are refused early.
 */
export function checkRules(text: string, source: string): RulesCheck {
  const lineCounter = new LineCounter();
  const problems = new Problems(source, lineCounter);
  const domains: DomainConfig[] = [];
  try {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > RULES_LIMITS.maxBytes) problems.fatal(0, '', sizeProblem(bytes));
    const documents = parseYamlDocuments(text, problems, lineCounter);
    let nonEmpty = 0;
    for (const yaml of documents) {
      if (yaml.document.contents === null) continue;
      nonEmpty += 1;
      const domain = readDomain(new DocumentReader(problems, yaml), yaml, source);
      if (domain !== undefined) domains.push(domain);
    }
    if (nonEmpty === 0 && problems.errors.length === 0) {
      problems.add(0, '', 'no domain here: write a document like "domain: my_service" followed by its descriptors');
    }
    problems.errors.push(...duplicateDomainErrors(domains));
  } catch (error) {
    if (!(error instanceof StopReading)) throw error;
  }
  const errors = [...problems.errors].sort((a, b) => a.line - b.line || a.column - b.column);
  return Object.freeze({ domains: Object.freeze(errors.length > 0 ? [] : domains), errors: Object.freeze(errors) });
}

function readDomain(reader: DocumentReader, yaml: YamlDocument, source: string): DomainConfig | undefined {
  const contents = reader.resolve(yaml.document.contents, '');
  if (contents === undefined) return undefined;
  const map = reader.mapping(contents, '', 'a mapping with domain and descriptors at the top of the document');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, '', DOCUMENT_FIELDS);
  const domainEntry = fields.get('domain');
  const domain = readText(reader, domainEntry);
  if (domainEntry?.value === undefined) reportMissing(reader, map, '', 'domain', 'every document names its domain (domain: my_service)');
  else if (domain === '') reader.report(domainEntry.value, domainEntry.path, 'domain must not be empty: name the domain (domain: my_service)');
  const descriptors = readDescriptorList(reader, { descriptorCount: 0 }, fields.get('descriptors'), 1);
  const allow = readList(reader, fields.get('allow'));
  const deny = readList(reader, fields.get('deny'));
  if (domain === undefined || domain === '') return undefined;
  const config: DomainConfig = Object.freeze({ domain, descriptors, source, ...(allow === undefined ? {} : { allow }), ...(deny === undefined ? {} : { deny }) });
  domainLocations.set(config, reader.problems.locate(offsetOf(domainEntry!.value)));
  return config;
}

/** Where a domain parsed by this module named itself (the `domain:` value). */
export function domainLocation(config: DomainConfig): SourceLocation | undefined {
  return domainLocations.get(config);
}

/**
 * One error per domain defined again after its first definition (in the same source or another),
 * at the second definition, naming where the first one is.
 */
export function duplicateDomainErrors(domains: readonly DomainConfig[]): RulesError[] {
  const first = new Map<string, DomainConfig>();
  const errors: RulesError[] = [];
  for (const config of domains) {
    const earlier = first.get(config.domain);
    if (earlier === undefined) {
      first.set(config.domain, config);
      continue;
    }
    const here = domainLocation(config) ?? { file: config.source, line: 1, column: 1 };
    const there = domainLocation(earlier) ?? { file: earlier.source, line: 1, column: 1 };
    errors.push(
      new RulesError(here.file, here.line, here.column, 'domain', `domain ${JSON.stringify(config.domain)} is already defined at ${there.file}:${there.line}:${there.column}; define each domain once`),
    );
  }
  return errors;
}

/** How sources that define the same domain are read. */
export interface DomainMergeOptions {
  /**
   * envoy's MERGE_DOMAIN_CONFIG: a domain defined in several sources is one domain with the
   * descriptors of all of them (a top-level key and value defined twice is still an error).
   * Default false: a domain defined twice is an error.
   */
  readonly mergeDomains?: boolean;
}

/**
 * The domains of several sources, one per name: with `mergeDomains`, same-named domains merged
 * (their top-level descriptors together, a repeated key and value an error at the repeat);
 * without, each name defined again is an error.
 */
export function combineDomains(domains: readonly DomainConfig[], options: DomainMergeOptions = {}): { domains: DomainConfig[]; errors: RulesError[] } {
  if (options.mergeDomains !== true) return { domains: [...domains], errors: duplicateDomainErrors(domains) };
  const merged = new Map<string, DomainConfig>();
  const errors: RulesError[] = [];
  for (const config of domains) {
    const earlier = merged.get(config.domain);
    if (earlier === undefined) {
      merged.set(config.domain, config);
      continue;
    }
    for (const descriptor of config.descriptors) {
      const first = earlier.descriptors.find((d) => d.key === descriptor.key && d.value === descriptor.value);
      if (first === undefined) continue;
      const { file, line, column } = descriptor.location;
      const what = descriptor.value === undefined ? `key ${JSON.stringify(descriptor.key)}` : `key ${JSON.stringify(descriptor.key)} value ${JSON.stringify(descriptor.value)}`;
      errors.push(new RulesError(file, line, column, 'descriptors', `domain ${JSON.stringify(config.domain)} is merged from several files, and ${what} is already defined at ${first.location.file}:${first.location.line}; define it once`));
    }
    const combined: DomainConfig = Object.freeze({ domain: config.domain, descriptors: Object.freeze([...earlier.descriptors, ...config.descriptors]), source: `${earlier.source}, ${config.source}` });
    domainLocations.set(combined, domainLocation(earlier) ?? { file: earlier.source, line: 1, column: 1 });
    merged.set(config.domain, combined);
  }
  return { domains: [...merged.values()], errors };
}

/** Counts descriptors at every depth. */
export function countDescriptors(descriptors: readonly DescriptorConfig[]): number {
  let count = descriptors.length;
  for (const descriptor of descriptors) count += countDescriptors(descriptor.descriptors);
  return count;
}
