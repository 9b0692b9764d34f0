/**
 * `tollgate usage`: what each descriptor has used of its rule's quota, and over which period,
 * through the admin listener's `GET /v1/usage` (nothing is spent). Named apart from src/cli/usage.ts,
 * which renders the commands' help.
 */
import { AdminApiError, InvalidOptionError } from '../../errors.js';
import { describeEntries, parseDescriptor, UNKNOWN_DOMAIN_EXIT } from './check.js';
import { callService, type Connection } from './connection.js';
import { printJson, table, type CommandOutput } from './output.js';

export const USAGE_FLAGS = {
  domain: { type: 'string' },
  descriptor: { type: 'string', multiple: true },
} as const;

export const USAGE_HELP = `Usage: tollgate usage --domain D --descriptor KEY=VALUE[,KEY=VALUE...] [options]

What each descriptor has used of the limit its rule sets, and over which period, from the running
service's admin listener (GET /v1/usage); nothing is counted.
  --domain D             the rules domain
  --descriptor K=V,...   one descriptor's entries, in order; repeat for several (org, org+team, ...)
Prints per descriptor the rule, used/limit and the period [start, end) in UTC (or the service's
answer with --json). Token buckets and GCRA: used is burst minus the tokens available, the period
runs until the bucket is full again; sliding windows: the rolling window ending now.
Exit codes: 0 done, 2 bad flags, 3 service unreachable or answering an error, 4 unknown domain.
`;

interface UsageRow {
  readonly descriptor: string;
  readonly rule: string | null;
  readonly name?: string;
  readonly unlimited?: boolean;
  readonly used?: number;
  readonly limit?: number;
  readonly periodStart?: number;
  readonly periodEnd?: number;
}

/** Asks the admin listener for the usage of the descriptors the flags give. */
export async function runUsage(connection: Connection, values: Record<string, unknown>, output: CommandOutput): Promise<number> {
  const domain = values.domain as string | undefined;
  if (domain === undefined || domain === '') throw new InvalidOptionError('usage needs --domain D (the rules domain)');
  const written = (values.descriptor as string[] | undefined) ?? [];
  if (written.length === 0) throw new InvalidOptionError('usage needs at least one --descriptor KEY=VALUE[,KEY=VALUE...]');
  const query = new URLSearchParams({ domain });
  for (const text of written) query.append('descriptor', describeEntries(parseDescriptor(text)));
  let answer;
  try {
    answer = await callService(connection, { method: 'GET', path: `/v1/usage?${query.toString()}`, shape: { domain: 'string', usage: 'array' } });
  } catch (error) {
    // A 404 of the route itself (the decision port) is a service error; only an unknown domain is exit 4.
    if (!(error instanceof AdminApiError) || error.status !== 404 || !error.message.includes('no rules for domain')) throw error;
    output.stderr(`tollgate usage: ${error.message}\n`);
    return UNKNOWN_DOMAIN_EXIT;
  }
  const body = answer.body as { usage: UsageRow[] };
  if (connection.json) printJson(output, body);
  else output.stdout(table(['DESCRIPTOR', 'RULE', 'USED', 'PERIOD'], body.usage.map(usageCells)));
  return 0;
}

function usageCells(row: UsageRow): string[] {
  if (row.rule === null) return [row.descriptor, 'none', '-', '-'];
  const rule = row.name === undefined ? row.rule : `${row.name} (${row.rule})`;
  if (row.unlimited === true) return [row.descriptor, rule, 'unlimited', '-'];
  return [row.descriptor, rule, `${row.used}/${row.limit}`, `${instant(row.periodStart!)} .. ${instant(row.periodEnd!)}`];
}

/** An epoch ms as ISO 8601 in UTC, to the second (a period's bounds are whole ms; most are whole seconds). */
function instant(ms: number): string {
  const iso = new Date(ms).toISOString();
  return ms % 1000 === 0 ? iso.replace('.000Z', 'Z') : iso;
}
