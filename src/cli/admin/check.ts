/**
 * `tollgate check`: one decision from the shell through `POST /v1/check`. Exit 0 when the
 * request would be admitted (OK), 1 when OVER_LIMIT, so a script can branch on it.
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkWholeNumberText } from '../../options.js';
import type { CheckResult, DescriptorStatus } from '../../rules/check.js';
import { UNLIMITED_REMAINING } from '../../rules/check.js';
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
Prints code, limit, remaining and reset per descriptor (or the service's answer with --json).
Exit codes: 0 OK, 1 OVER_LIMIT, 2 bad flags, 3 service unreachable or answering an error.
`;

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
function parseDescriptor(text: string): Record<string, string> {
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

export async function runCheck(connection: Connection, values: Record<string, unknown>, output: CommandOutput): Promise<number> {
  const body = checkBody(values);
  const answer = await callService(connection, { method: 'POST', path: '/v1/check', body: JSON.stringify(body), contentType: 'application/json', accept: [429], shape: { overallCode: 'string', statuses: 'array' } });
  const result = answer.body as CheckResult & { degraded?: string };
  if (connection.json) printJson(output, result);
  else output.stdout(checkTable(body.descriptors, result));
  return result.overallCode === 'OK' ? 0 : 1;
}

function checkTable(descriptors: readonly Record<string, string>[], result: CheckResult & { degraded?: string }): string {
  const rows = result.statuses.map((status, index) => [describeEntries(descriptors[index]), status.code, limitOf(status), remainingOf(status), status.currentLimit === undefined ? '-' : readableMs(status.durationUntilReset)]);
  const degraded = result.degraded === undefined ? '' : ` (degraded: ${result.degraded})`;
  return `${table(['DESCRIPTOR', 'CODE', 'LIMIT', 'REMAINING', 'RESET'], rows)}overall: ${result.overallCode}${degraded}\n`;
}

function describeEntries(entries: Record<string, string> | undefined): string {
  return Object.entries(entries ?? {}).map(([key, value]) => `${key}=${value}`).join(',');
}

function limitOf(status: DescriptorStatus): string {
  const limit = status.currentLimit;
  if (limit === undefined) return status.limitRemaining === UNLIMITED_REMAINING ? 'unlimited' : 'none';
  const per = limit.unitMultiplier === 1 ? limit.unit : `${limit.unitMultiplier} ${limit.unit}s`;
  return `${limit.requestsPerUnit}/${per}`;
}

function remainingOf(status: DescriptorStatus): string {
  return status.limitRemaining === UNLIMITED_REMAINING ? '-' : String(status.limitRemaining);
}
