/**
 * `tollgate overrides get|put|delete`: a running service's per-tenant overrides, through the admin
 * listener's `GET|PUT|DELETE /v1/overrides` (docs/rules.md, "Per-tenant overrides at runtime").
 * A put is read and checked here first, with the service's own reader, so a mistake is reported
 * as file:line:col before anything is sent.
 */
import { readFile } from 'node:fs/promises';
import { AdminApiError, InvalidOptionError, RulesError, describeValue } from '../../errors.js';
import { readOverrides, type ListedOverride } from '../../rules/overrides.js';
import { parseDescriptor } from './check.js';
import { callService, requireToken, type Connection } from './connection.js';
import { printJson, table, type CommandOutput } from './output.js';

export const OVERRIDES_FLAGS = {
  domain: { type: 'string' },
  descriptor: { type: 'string' },
  all: { type: 'boolean' },
} as const;

export const OVERRIDES_HELP = `Usage: tollgate overrides get [--domain D] | put FILE|- | delete --domain D (--descriptor K=V,... | --all) [options]

  get [--domain D]          the overrides held (GET /v1/overrides): id, limit, expiry, the rule each
                            shadows; --domain D: that domain's only
  put FILE|-                an override file (YAML documents or JSON, one override or an array, in
                            the rules' shape with an optional expires: 24h or an ISO time), or - for
                            standard input: checked here (errors as file:line:col, exit 2, nothing
                            sent), then PUT /v1/overrides (needs the admin token)
  delete --domain D --descriptor K=V,...
                            the override of that path, its entries in order (plan=gold,user=acme);
                            exit 1 when there is none
  delete --domain D --all   every override of the domain
Exit codes: 0 done, 1 delete: no such override, 2 bad flags or an invalid override (nothing
changed), 3 service unreachable or answering an error.
`;

/** `overrides get`: the overrides held, as a table (or the service's answer with --json). */
export async function runOverridesGet(connection: Connection, values: Record<string, unknown>, positionals: readonly string[], output: CommandOutput): Promise<number> {
  if (positionals.length > 0) throw new InvalidOptionError(`overrides get takes no arguments (got ${describeValue(positionals.join(' '))}); use --domain D to show one domain's`);
  const answer = await callService(connection, { method: 'GET', path: '/v1/overrides', shape: { overrides: 'array' } });
  const domain = values.domain as string | undefined;
  const overrides = (answer.body as { overrides: ListedOverride[] }).overrides.filter((override) => domain === undefined || override.domain === domain);
  if (connection.json) printJson(output, { overrides });
  else output.stdout(table(['ID', 'LIMIT', 'EXPIRES', 'SHADOWS'], overrides.map((override) => [override.id, limitText(override.rateLimit), override.expires ?? 'never', override.shadows ?? '(no rule: applies nowhere)'])));
  return 0;
}

function limitText(limit: ListedOverride['rateLimit']): string {
  if (limit.unlimited) return 'unlimited';
  return `${limit.requestsPerUnit ?? '?'}/${limit.unit ?? '?'} ${limit.algorithm}`;
}

/** `overrides put FILE|-`: checked here, then sent as it was written. */
export async function runOverridesPut(connection: Connection, positionals: readonly string[], output: CommandOutput, stdin: () => Promise<string>): Promise<number> {
  if (positionals.length !== 1) throw new InvalidOptionError(`overrides put takes one FILE (YAML or JSON) or - for standard input, got ${positionals.length}`);
  requireToken(connection);
  const path = positionals[0]!;
  const source = path === '-' ? 'stdin' : path;
  const text = path === '-' ? await stdin() : await readText(path);
  try {
    readOverrides(text, Date.now(), source);
  } catch (error) {
    if (!(error instanceof RulesError)) throw error;
    output.stderr(`${error.message}\ntollgate overrides put: ${source} is not a valid override; nothing was sent\n`);
    return 2;
  }
  const json = /^\s*[[{]/.test(text);
  let answer;
  try {
    answer = await callService(connection, { method: 'PUT', path: '/v1/overrides', body: text, contentType: json ? 'application/json' : 'application/yaml', shape: { put: 'array', version: 'string' } });
  } catch (error) {
    // The service checks what only it knows (the domain and a rule on the path): its 400 is the input's fault.
    if (!(error instanceof AdminApiError) || error.status !== 400) throw error;
    output.stderr(`tollgate overrides put: ${error.message}; nothing was changed\n`);
    return 2;
  }
  const body = answer.body as { put: ListedOverride[]; version: string };
  if (connection.json) printJson(output, body);
  else output.stdout(body.put.map((override) => `put ${override.id}: ${limitText(override.rateLimit)}, expires ${override.expires ?? 'never'}, shadows ${override.shadows ?? 'nothing'}\n`).join(''));
  return 0;
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new InvalidOptionError(`${describeValue(path)} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): give an override file, or - for standard input`);
  }
}

/** `overrides delete --domain D (--descriptor K=V,... | --all)`. */
export async function runOverridesDelete(connection: Connection, values: Record<string, unknown>, positionals: readonly string[], output: CommandOutput): Promise<number> {
  if (positionals.length > 0) throw new InvalidOptionError(`overrides delete takes flags only, got ${describeValue(positionals.join(' '))}`);
  const domain = values.domain as string | undefined;
  if (domain === undefined || domain === '') throw new InvalidOptionError('overrides delete needs --domain D');
  const descriptor = values.descriptor as string | undefined;
  const all = values.all === true;
  if ((descriptor === undefined) === !all) throw new InvalidOptionError('overrides delete takes either --descriptor K=V,... (one override, its entries in order) or --all (every override of the domain)');
  requireToken(connection);
  const query = new URLSearchParams({ domain });
  if (all) query.set('all', 'true');
  else for (const [key, value] of Object.entries(parseDescriptor(descriptor!))) query.append('entry', `${key}=${value}`);
  let answer;
  try {
    answer = await callService(connection, { method: 'DELETE', path: `/v1/overrides?${query.toString()}`, shape: { domain: 'string', deleted: 'number' } });
  } catch (error) {
    if (!(error instanceof AdminApiError) || error.status !== 404 || !error.message.includes('no override of domain')) throw error;
    output.stderr(`tollgate overrides delete: no override of domain ${domain} at ${descriptor!}; tollgate overrides get lists them\n`);
    return 1;
  }
  const body = answer.body as { domain: string; deleted: number };
  if (connection.json) printJson(output, body);
  else output.stdout(all ? `deleted ${body.deleted} override(s) of domain ${domain}\n` : `deleted ${domain}|${descriptor!.split(',').join('|')}\n`);
  return 0;
}
