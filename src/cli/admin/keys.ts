/**
 * `tollgate keys inspect|reset|block|unblock|blocked`: the key admin endpoints from the shell. A
 * key's counter is named by its key and the policy it is counted under, so inspect and reset take
 * both; the policy is checked here first (bad flags exit 2 before anything is sent).
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkDurationText } from '../../options.js';
import { compilePolicy, type Policy } from '../../policy.js';
import { callService, requireToken, type Connection } from './connection.js';
import { printJson, readableMs, table, type CommandOutput } from './output.js';

export const KEYS_FLAGS = {
  key: { type: 'string' },
  algorithm: { type: 'string' },
  limit: { type: 'string' },
  window: { type: 'string' },
  precision: { type: 'string' },
  for: { type: 'string' },
  domain: { type: 'string' },
} as const;

export const KEYS_HELP = `Usage: tollgate keys inspect|reset|block|unblock|blocked [flags] [options]   (needs the admin token)

  inspect --key K --algorithm A --limit N --window W [--precision P]
                     what a request on K would get now (GET /v1/keys; nothing is counted)
  reset   --key K --algorithm A --limit N --window W [--precision P]
                     forget K's count under that policy (DELETE /v1/keys)
  block   --key K [--domain D] [--for DURATION]
                     deny K at once for DURATION (1h; at most 1w): a /v1/limit key (user:42) or a
                     descriptor entry written key=value (remote_address=203.0.113.7), on this node
                     (all its workers);
                     in checks of domain D only, or without --domain in every domain (and /v1/limit)
  unblock --key K [--domain D]
                     lift the block of K in D, or without --domain its all-domains block
  blocked            the keys blocked now, each with its domain ("*": all domains)
Exit codes: 0 done (unblock: the key was blocked), 1 unblock: the key was not blocked, 2 bad flags,
3 service unreachable or answering an error.
`;

const ONE_HOUR_MS = 3_600_000;
/** The longest block the service takes (a week). */
const MAX_BLOCK_MS = 7 * 24 * ONE_HOUR_MS;

function requireKey(values: Record<string, unknown>, action: string): string {
  const key = values.key as string | undefined;
  if (key === undefined || key === '') throw new InvalidOptionError(`keys ${action} needs --key K (e.g. --key user:42 or --key remote_address=203.0.113.7)`);
  return key;
}

/** The key and policy query of inspect and reset, the policy validated as the service would. */
function keyQuery(values: Record<string, unknown>, action: string): string {
  const key = requireKey(values, action);
  const { algorithm, limit, window, precision } = values as Record<string, string | undefined>;
  if (algorithm === undefined || limit === undefined || window === undefined) {
    throw new InvalidOptionError(`keys ${action} needs the policy the key is counted under: --algorithm A --limit N --window W (e.g. --algorithm token-bucket --limit 10 --window 1s)`);
  }
  const number = (text: string): number | string => (/^\d+$/.test(text) ? Number(text) : text);
  const policy = { algorithm, limit: number(limit), window: number(window), ...(precision !== undefined ? { precision: number(precision) } : {}) };
  // Throws InvalidPolicyError naming the field: a bad flag, exit 2.
  compilePolicy(policy as unknown as Policy);
  const query = new URLSearchParams({ key, algorithm, limit, window, ...(precision !== undefined ? { precision } : {}) });
  return `/v1/keys?${query.toString()}`;
}

interface Decision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly resetAt: number;
  readonly now: number;
}

export async function runKeys(connection: Connection, action: string | undefined, values: Record<string, unknown>, output: CommandOutput): Promise<number> {
  requireToken(connection);
  if (action === 'inspect' || action === 'reset') {
    const path = keyQuery(values, action);
    const answer = await callService(connection, { method: action === 'inspect' ? 'GET' : 'DELETE', path, shape: action === 'inspect' ? { decision: 'object' } : { reset: 'boolean' } });
    if (connection.json) printJson(output, answer.body);
    else if (action === 'reset') output.stdout(`reset ${values.key as string}\n`);
    else output.stdout(decisionTable(values.key as string, (answer.body as { decision: Decision }).decision));
    return 0;
  }
  if (action === 'block') return block(connection, values, output);
  if (action === 'unblock') {
    const key = requireKey(values, action);
    const domain = values.domain as string | undefined;
    const query = new URLSearchParams({ key, ...(domain !== undefined ? { domain } : {}) });
    const answer = (await callService(connection, { method: 'DELETE', path: `/v1/keys/block?${query.toString()}`, shape: { unblocked: 'boolean' } })).body as { unblocked: boolean };
    if (connection.json) printJson(output, answer);
    else output.stdout(answer.unblocked ? `unblocked ${key} ${scopeText(domain)}\n` : `${key} was not blocked ${scopeText(domain)}\n`);
    return answer.unblocked ? 0 : 1;
  }
  if (action === 'blocked') {
    const answer = (await callService(connection, { method: 'GET', path: '/v1/keys/blocked', shape: { blocked: 'array' } })).body;
    if (connection.json) printJson(output, answer);
    else output.stdout(blockedTable((answer as { blocked: readonly Block[] }).blocked));
    return 0;
  }
  throw new InvalidOptionError(`keys takes inspect, reset, block, unblock or blocked, got ${describeValue(action ?? '')}`);
}

async function block(connection: Connection, values: Record<string, unknown>, output: CommandOutput): Promise<number> {
  const key = requireKey(values, 'block');
  const written = values.for as string | undefined;
  // A duration with its unit (10m, 1h), as for every duration flag: a bare number is refused.
  const ttlMs = checkDurationText(written, '--for', { minMs: 1, maxMs: MAX_BLOCK_MS, fallbackMs: ONE_HOUR_MS });
  const domain = values.domain as string | undefined;
  const body = JSON.stringify({ key, ttlMs, ...(domain !== undefined ? { domain } : {}) });
  const answer = (await callService(connection, { method: 'POST', path: '/v1/keys/block', body, contentType: 'application/json', shape: { blockedUntil: 'number' } })).body as { blockedUntil: number };
  if (connection.json) printJson(output, answer);
  else output.stdout(`blocked ${key} ${scopeText(domain)} for ${readableMs(ttlMs)} (until ${new Date(answer.blockedUntil).toISOString()})\n`);
  return 0;
}

interface Block {
  readonly key: string;
  readonly domain: string;
  readonly until: number;
}

/** One line per block: its key, its domain ("*": all), when it ends; or a line saying there is none. */
function blockedTable(blocks: readonly Block[]): string {
  if (blocks.length === 0) return 'no key is blocked\n';
  return table(['KEY', 'DOMAIN', 'UNTIL'], blocks.map((block) => [block.key, block.domain, new Date(block.until).toISOString()]));
}

/** Where a block applies, in words: a block names its domain or applies to all. */
function scopeText(domain: string | undefined): string {
  return domain === undefined || domain === '*' ? 'in all domains' : `in domain ${domain}`;
}

/** The reset is relative to the decision's own `now`, not to this machine's clock. */
function decisionTable(key: string, decision: Decision): string {
  return table(['KEY', 'ALLOWED', 'LIMIT', 'REMAINING', 'RESET'], [[key, String(decision.allowed), String(decision.limit), String(decision.remaining), readableMs(Math.max(0, decision.resetAt - decision.now))]]);
}
