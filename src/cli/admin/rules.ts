/**
 * `tollgate rules get|push|diff`: the rules in force on a running service, replacing domains, and
 * what a replacement would change. Files are validated here first, with the service's own parser,
 * so a mistake is reported as file:line:col before anything is sent.
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkRuleFiles, readRuleSources } from '../../rules/files.js';
import { checkRules } from '../../rules/parse/index.js';
import { compileRules } from '../../rules/ruleset.js';
import type { DomainConfig } from '../../rules/types.js';
import { callService, requireToken, type Connection } from './connection.js';
import { printJson, type CommandOutput } from './output.js';
import { diffDomain, limitsByDomain, type DomainDiff } from './rules-diff.js';

export const RULES_FLAGS = { domain: { type: 'string' } } as const;

export const RULES_HELP = `Usage: tollgate rules get [--domain D] | push FILE|DIR | diff FILE|DIR [options]

  get [--domain D]   the limits in force (GET /v1/rules and /rlconfig): version, domains, and one
                     line per limit as envoy's /rlconfig writes it
  push FILE|DIR      validate the rules here (errors as file:line:col, exit 2, nothing sent), then
                     PUT /v1/rules: each domain in the files is replaced (needs the admin token)
  diff FILE|DIR      per domain in the files, the limits a push would add (+), remove (-) or
                     change; exit 0 when nothing would change, 1 when something would
Exit codes: 0 done (diff: no change), 1 diff: changes (get: --domain not in force), 2 bad flags or
invalid rules, 3 service unreachable or answering an error.
`;

/** What the service has in force: its version, domains, and each domain's /rlconfig lines. */
interface InForce {
  readonly version: string;
  readonly domains: readonly string[];
  readonly limits: ReadonlyMap<string, readonly string[]>;
}

async function readInForce(connection: Connection): Promise<InForce> {
  const rules = (await callService(connection, { method: 'GET', path: '/v1/rules', shape: { version: 'string', domains: 'array' } })).body as { version: string; domains: string[] };
  const dump = (await callService(connection, { method: 'GET', path: '/rlconfig' })).body;
  return { version: rules.version, domains: rules.domains, limits: limitsByDomain(String(dump), rules.domains) };
}

export async function runRulesGet(connection: Connection, values: Record<string, unknown>, positionals: readonly string[], output: CommandOutput): Promise<number> {
  if (positionals.length > 0) throw new InvalidOptionError(`rules get takes no PATH (got ${describeValue(positionals.join(' '))}); use --domain D to show one domain`);
  const inForce = await readInForce(connection);
  const wanted = values.domain as string | undefined;
  if (wanted !== undefined && !inForce.domains.includes(wanted)) {
    output.stderr(`tollgate rules get: domain ${describeValue(wanted)} is not in force; the domains are ${inForce.domains.join(', ') || '(none)'}\n`);
    return 1;
  }
  const shown = wanted === undefined ? inForce.domains : [wanted];
  if (connection.json) {
    printJson(output, { version: inForce.version, domains: shown, limits: Object.fromEntries(shown.map((domain) => [domain, inForce.limits.get(domain) ?? []])) });
    return 0;
  }
  output.stdout(`# version ${inForce.version}; ${shown.length} domain(s)\n`);
  for (const domain of shown) output.stdout(`\n# domain ${domain}\n${(inForce.limits.get(domain) ?? []).map((line) => `${line}\n`).join('')}`);
  return 0;
}

/** The files' domains and their texts joined into one YAML stream, or the exit code once errors are printed. */
async function readValidated(positionals: readonly string[], command: string, output: CommandOutput): Promise<{ domains: readonly DomainConfig[]; yaml: string } | number> {
  if (positionals.length !== 1) throw new InvalidOptionError(`rules ${command} takes one FILE|DIR (a rules file or a directory of *.yaml/*.json files), got ${positionals.length}`);
  const path = positionals[0]!;
  const { domains, errors } = await checkRuleFiles(path);
  if (errors.length > 0) {
    output.stderr(errors.map((error) => `${error.message}\n`).join(''));
    output.stderr(`tollgate rules ${command}: ${errors.length} problem(s) in ${path}; nothing was sent\n`);
    return 2;
  }
  const texts = (await readRuleSources(path)).map(({ text }) => (text.endsWith('\n') ? text : `${text}\n`));
  // `...` ends each file's last document, so the next file may open with its own directives.
  const yaml = texts.join('...\n');
  // A safeguard: what is sent must parse as what was checked.
  const joined = checkRules(yaml, `${path} (the files joined into one YAML stream)`);
  if (joined.errors.length > 0) {
    output.stderr(joined.errors.map((error) => `${error.message}\n`).join(''));
    output.stderr(`tollgate rules ${command}: the files of ${path} do not make one YAML stream; nothing was sent\n`);
    return 2;
  }
  return { domains, yaml };
}

export async function runRulesPush(connection: Connection, positionals: readonly string[], output: CommandOutput): Promise<number> {
  requireToken(connection);
  const read = await readValidated(positionals, 'push', output);
  if (typeof read === 'number') return read;
  const answer = (await callService(connection, { method: 'PUT', path: '/v1/rules', body: read.yaml, contentType: 'application/yaml', shape: { domains: 'array', version: 'string' } })).body as { domains: string[]; version: string; pushed?: number; skipped?: { domain: string }[]; warnings?: string[] };
  if (connection.json) {
    printJson(output, answer);
    return 0;
  }
  const generation = answer.pushed === undefined ? ' (this node only: the service has no Redis)' : `, generation ${answer.pushed} on every node`;
  output.stdout(`pushed ${answer.domains.join(', ')}: version ${answer.version}${generation}\n`);
  for (const warning of answer.warnings ?? []) output.stderr(`warning: ${warning}\n`);
  if ((answer.skipped ?? []).length > 0) output.stderr(`warning: every node skips stored domains that do not validate: ${answer.skipped!.map((skip) => skip.domain).join(', ')}; push them again\n`);
  return 0;
}

export async function runRulesDiff(connection: Connection, positionals: readonly string[], output: CommandOutput): Promise<number> {
  const read = await readValidated(positionals, 'diff', output);
  if (typeof read === 'number') return read;
  const local = compileRules(read.domains);
  const proposed = limitsByDomain(local.dump(), local.domainNames());
  const inForce = await readInForce(connection);
  const diffs = local.domainNames().map((domain) => diffDomain(domain, inForce.limits.get(domain), proposed.get(domain) ?? []));
  const changed = diffs.some((diff) => diff.status !== 'unchanged');
  if (connection.json) printJson(output, { version: inForce.version, changed, domains: diffs });
  else output.stdout(diffs.map(describeDiff).join(''));
  return changed ? 1 : 0;
}

function describeDiff(diff: DomainDiff): string {
  if (diff.status === 'unchanged') return `domain ${diff.domain}: no change\n`;
  const lines = [`domain ${diff.domain}: ${diff.status === 'new' ? 'new (not in force)' : 'changed'}`];
  for (const line of diff.removed) lines.push(`- ${line}`);
  for (const { from, to } of diff.changed) lines.push(`- ${from}`, `+ ${to}`);
  for (const line of diff.added) lines.push(`+ ${line}`);
  return lines.map((line) => `${line}\n`).join('');
}
