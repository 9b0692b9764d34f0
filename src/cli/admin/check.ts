/**
 * `tollgate check`: one decision from the shell through `POST /v1/check`. Exit 0 when the
 * request would be admitted (OK), 1 when OVER_LIMIT, so a script can branch on it.
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkWholeNumberText } from '../../options.js';
import type { CheckResult, DescriptorStatus } from '../../rules/check.js';
import { UNLIMITED_REMAINING } from '../../rules/check.js';
import { closestMatch } from '../../rules/parse/suggest.js';
import { callService, type Connection } from './connection.js';
import { printJson, readableMs, table, type CommandOutput } from './output.js';

export const CHECK_FLAGS = {
  domain: { type: 'string' },
  descriptor: { type: 'string', multiple: true },
  hits: { type: 'string' },
} as const;

export const CHECK_HELP = `Usage: tollgate check --domain D --descriptor KEY=VALUE[,KEY=VALUE...] [--hits N] [options]

One decision from the running service (POST /v1/check); it counts, as a real request would.
  --domain D             the rules domain
  --descriptor K=V,...   one descriptor's entries, in order; repeat for several descriptors
  --hits N               units to count (1)
Prints code, limit, remaining and reset per descriptor (or the service's answer with --json); a
key blocked by \`tollgate keys block\` shows LIMIT blocked.
Exit codes: 0 OK, 1 OVER_LIMIT, 2 bad flags, 3 service unreachable or answering an error,
4 unknown domain (no rules for --domain: the known ones are listed, from the admin listener).
`;

/** The exit code of a check whose --domain has no rules (the service limits nothing there). */
export const UNKNOWN_DOMAIN_EXIT = 4;

/** The friendly /v1/check body the flags describe. @throws {InvalidOptionError} */
export function checkBody(values: Record<string, unknown>): { domain: string; descriptors: Record<string, string>[]; hits?: number } {
  const domain = values.domain as string | undefined;
  if (domain === undefined || domain === '') throw new InvalidOptionError('check needs --domain D (the rules domain to check against)');
  const written = (values.descriptor as string[] | undefined) ?? [];
  if (written.length === 0) throw new InvalidOptionError('check needs at least one --descriptor KEY=VALUE[,KEY=VALUE...]');
  const hits = values.hits as string | undefined;
  return { domain, descriptors: written.map(parseDescriptor), ...(hits !== undefined ? { hits: checkWholeNumberText(hits, { name: '--hits', min: 0 }) } : {}) };
}

/** `remote_address=1.2.3.4,path=/api` → its entries in order (a value may contain `=`, not `,`). */
export function parseDescriptor(text: string): Record<string, string> {
  const entries: [string, string][] = [];
  for (const part of text.split(',')) {
    const at = part.indexOf('=');
    if (at <= 0) throw new InvalidOptionError(`--descriptor ${describeValue(text)}: each entry is KEY=VALUE, got ${describeValue(part)}`);
    const key = part.slice(0, at);
    if (entries.some(([seen]) => seen === key)) throw new InvalidOptionError(`--descriptor ${describeValue(text)} names ${describeValue(key)} twice: give each key once per descriptor`);
    entries.push([key, part.slice(at + 1)]);
  }
  return Object.fromEntries(entries);
}

type CheckAnswer = CheckResult & { degraded?: string; unknownDomain?: boolean };

/**
 * `admin` reaches the admin listener, asked for the known domains only when --domain is unknown.
 * An unknown domain is answered OK by the service (as envoy); here it is exit 4, with the known ones.
 */
export async function runCheck(connection: Connection, values: Record<string, unknown>, output: CommandOutput, admin: () => Connection): Promise<number> {
  const body = checkBody(values);
  const answer = await callService(connection, { method: 'POST', path: '/v1/check', body: JSON.stringify(body), contentType: 'application/json', accept: [429], shape: { overallCode: 'string', statuses: 'array' } });
  const result = answer.body as CheckAnswer;
  const unknown = result.unknownDomain === true && result.overallCode === 'OK';
  if (connection.json) printJson(output, result);
  else if (!unknown) output.stdout(checkTable(body.descriptors, result));
  if (!unknown) return result.overallCode === 'OK' ? 0 : 1;
  output.stderr(`tollgate check: unknown domain ${body.domain} (${await knownDomains(admin, body.domain)}); nothing is limited there\n`);
  return UNKNOWN_DOMAIN_EXIT;
}

/** `known: a, b` from the admin listener's GET /v1/rules (the closest first), or why they could not be listed. */
async function knownDomains(admin: () => Connection, unknown: string): Promise<string> {
  try {
    const rules = (await callService(admin(), { method: 'GET', path: '/v1/rules', shape: { domains: 'array' } })).body as { domains: string[] };
    const closest = closestMatch(unknown, rules.domains);
    return `${closest === undefined ? '' : `did you mean ${closest}? `}known: ${rules.domains.join(', ') || 'none'}`;
  } catch (error) {
    return `the known domains could not be read from the admin listener: ${(error as Error).message.split(';')[0]}`;
  }
}

/** The rule a status names when a key block (`tollgate keys block`) denied it. */
const BLOCKED_RULE = 'blocked';

function checkTable(descriptors: readonly Record<string, string>[], result: CheckResult & { degraded?: string }): string {
  const rows = result.statuses.map((status, index) => [describeEntries(descriptors[index]), status.code, limitOf(status), remainingOf(status), status.currentLimit === undefined ? '-' : readableMs(status.durationUntilReset)]);
  const degraded = result.degraded === undefined ? '' : ` (degraded: ${result.degraded})`;
  return `${table(['DESCRIPTOR', 'CODE', 'LIMIT', 'REMAINING', 'RESET'], rows)}overall: ${result.overallCode}${degraded}\n`;
}

export function describeEntries(entries: Record<string, string> | undefined): string {
  return Object.entries(entries ?? {}).map(([key, value]) => `${key}=${value}`).join(',');
}

function limitOf(status: DescriptorStatus): string {
  if (status.rule === BLOCKED_RULE) return 'blocked';
  const limit = status.currentLimit;
  if (limit === undefined) return status.limitRemaining === UNLIMITED_REMAINING ? 'unlimited' : 'none';
  const per = limit.unitMultiplier === 1 ? limit.unit : `${limit.unitMultiplier} ${limit.unit}s`;
  return `${limit.requestsPerUnit}/${per}`;
}

function remainingOf(status: DescriptorStatus): string {
  return status.limitRemaining === UNLIMITED_REMAINING ? '-' : String(status.limitRemaining);
}
