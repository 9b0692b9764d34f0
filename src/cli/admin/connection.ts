/**
 * How `tollgate check|rules|keys` reach a running service: the common flags (`--url`,
 * `--token-file`, `--json`, `--timeout`), the admin token (from the environment or a file, never
 * from the command line, where `ps` would show it), and one HTTP request with its errors made plain.
 */
import { readFileSync } from 'node:fs';
import { AdminApiError, InvalidOptionError, describeValue } from '../../errors.js';
import { DEFAULT_ADMIN_PORT, checkDurationText } from '../../options.js';

/** Where and how to talk to the service. */
export interface Connection {
  /** The service's base URL, without a trailing slash. */
  readonly url: string;
  readonly token: string | undefined;
  readonly json: boolean;
  readonly timeoutMs: number;
}

/** The flags every admin command takes, as `parseArgs` options. */
export const CONNECTION_FLAGS = {
  url: { type: 'string' },
  'token-file': { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  timeout: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The decision listener's default address (`tollgate check`). */
export const DEFAULT_URL = 'http://127.0.0.1:8080';
/** The admin listener's default address (`rules`, `keys`): serve's --admin-port default on loopback. */
export const DEFAULT_ADMIN_URL = `http://127.0.0.1:${DEFAULT_ADMIN_PORT}`;
const DEFAULT_TIMEOUT_MS = 5_000;
const MAX_TIMEOUT_MS = 600_000;

/**
 * Which listener a command talks to: decisions (`check`: `TOLLGATE_URL`, default port 8080) or the
 * admin API (`rules`, `keys`: `TOLLGATE_ADMIN_URL`, default the admin port 6070), which listen
 * apart (docs/service.md, "Planes").
 */
export type Plane = 'decisions' | 'admin';

/** The connection the flags and environment describe. @throws {InvalidOptionError} on a bad flag. */
export function resolveConnection(values: Record<string, unknown>, env: NodeJS.ProcessEnv, plane: Plane): Connection {
  if (values.token !== undefined) {
    throw new InvalidOptionError('--token is refused: a token on the command line shows in `ps` and shell history; set TOLLGATE_ADMIN_TOKEN or give --token-file FILE');
  }
  return { url: resolveUrl(values.url as string | undefined, env, plane), token: resolveToken(values['token-file'] as string | undefined, env), json: values.json === true, timeoutMs: resolveTimeout(values.timeout as string | undefined) };
}

function resolveUrl(flag: string | undefined, env: NodeJS.ProcessEnv, plane: Plane): string {
  const name = plane === 'admin' ? 'TOLLGATE_ADMIN_URL' : 'TOLLGATE_URL';
  const variable = env[name] !== undefined && env[name] !== '' ? name : undefined;
  const fallback = plane === 'admin' ? DEFAULT_ADMIN_URL : DEFAULT_URL;
  const given = flag ?? (variable !== undefined ? env[variable]! : fallback);
  const where = flag !== undefined ? '--url' : (variable ?? 'the default URL');
  let parsed: URL;
  try {
    parsed = new URL(given);
  } catch {
    throw new InvalidOptionError(`${where} ${describeValue(given)} is not a URL: write the service's address, e.g. ${fallback}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new InvalidOptionError(`${where} must be an http:// or https:// URL, got ${describeValue(given)}`);
  if (parsed.search !== '' || parsed.hash !== '') throw new InvalidOptionError(`${where} is the service's base URL, without a query or fragment; got ${describeValue(given)}`);
  return parsed.href.replace(/\/+$/, '');
}

function resolveToken(file: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (file === undefined) return env.TOLLGATE_ADMIN_TOKEN === '' ? undefined : env.TOLLGATE_ADMIN_TOKEN;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new InvalidOptionError(`--token-file ${describeValue(file)} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): give a file holding the admin token`);
  }
  // A file written by `echo` ends with a newline that is not part of the token.
  const token = text.replace(/\r?\n$/, '');
  if (token === '' || /[\r\n]/.test(token)) throw new InvalidOptionError(`--token-file ${describeValue(file)} must hold the admin token alone, on one line`);
  return token;
}

function resolveTimeout(flag: string | undefined): number {
  // A duration with its unit (300ms, 5s): a bare number is refused, as for every duration flag.
  return checkDurationText(flag, '--timeout', { minMs: 1, maxMs: MAX_TIMEOUT_MS, fallbackMs: DEFAULT_TIMEOUT_MS });
}

/** Refuses, before sending anything, an admin request without a token. */
export function requireToken(connection: Connection): void {
  if (connection.token === undefined) throw new InvalidOptionError('this command needs the admin token: set TOLLGATE_ADMIN_TOKEN or give --token-file FILE (the service\'s --admin-token)');
}

/** One answer: its status and its body (JSON when the service sent JSON, else text). */
export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
}

export interface ApiRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly path: string;
  readonly body?: string;
  readonly contentType?: string;
  /** Statuses that are answers rather than errors (2xx always are). */
  readonly accept?: readonly number[];
  /** The answer's fields and their types (else the answer must be text): checked, so another server's answer is an error, not a crash. */
  readonly shape?: Readonly<Record<string, 'string' | 'number' | 'boolean' | 'array' | 'object'>>;
}

/**
 * Sends one request. @throws {AdminApiError} when the service cannot be reached, is slower than
 * the timeout, or answers an error status (the service's own message kept).
 */
export async function callService(connection: Connection, request: ApiRequest): Promise<ApiAnswer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  // Sent on every request: observability endpoints may be protected by the same token.
  if (connection.token !== undefined) headers.authorization = `Bearer ${connection.token}`;
  if (request.contentType !== undefined) headers['content-type'] = request.contentType;
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${connection.url}${request.path}`, { method: request.method, headers, body: request.body, signal: AbortSignal.timeout(connection.timeoutMs) });
    text = await response.text();
  } catch (error) {
    throw new AdminApiError(`cannot reach the service at ${connection.url}: ${networkProblem(error, connection.timeoutMs)}; is \`tollgate serve\` running there? (set --url, or TOLLGATE_URL for check, TOLLGATE_ADMIN_URL for rules and keys)`);
  }
  const body = parseBody(text, response.headers.get('content-type'));
  const ok = (response.status >= 200 && response.status < 300) || (request.accept ?? []).includes(response.status);
  const what = `${request.method} ${request.path.split('?')[0]}`;
  if (!ok) throw answerError(connection, what, response.status, body);
  const unexpected = shapeProblem(body, request.shape);
  if (unexpected !== undefined) throw new AdminApiError(`the answer of ${connection.url} to ${what} is not Tollgate's (${unexpected}); is --url a Tollgate service?`, response.status);
  return { status: response.status, body };
}

/** The error of an error status: the service's own message, and a hint for 401 and 404. */
export function answerError(connection: Connection, what: string, status: number, body: unknown): AdminApiError {
  return new AdminApiError(`the service at ${connection.url} answered ${status} to ${what}: ${serviceMessage(body)}${hintFor(status)}`, status);
}

function shapeProblem(body: unknown, shape: ApiRequest['shape']): string | undefined {
  if (shape === undefined) return typeof body === 'string' ? undefined : 'text expected';
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return `a JSON object expected, got ${describeValue(body)}`;
  for (const [field, type] of Object.entries(shape)) {
    const value = (body as Record<string, unknown>)[field];
    const actual = Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
    if (actual !== type) return `${field} should be ${type === 'array' ? 'an array' : `a ${type}`}, got ${describeValue(value)}`;
  }
  return undefined;
}

export function networkProblem(error: unknown, timeoutMs: number): string {
  if ((error as Error).name === 'TimeoutError') return `no answer within --timeout ${timeoutMs} ms`;
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message;
}

/** An answer's body: JSON when the service sent JSON, else its text. */
export function parseBody(text: string, contentType: string | null): unknown {
  if (contentType?.includes('json') !== true) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function serviceMessage(body: unknown): string {
  if (typeof body === 'object' && body !== null && typeof (body as { message?: unknown }).message === 'string') return (body as { message: string }).message;
  const text = typeof body === 'string' ? body.trim() : JSON.stringify(body);
  return text === '' ? '(no message)' : text.slice(0, 500);
}

function hintFor(status: number): string {
  if (status === 401) return ' (the token from TOLLGATE_ADMIN_TOKEN or --token-file is not the service\'s --admin-token)';
  if (status === 404) return ' (check goes to the decision port, rules and keys to the admin listener, --admin-port: is --url the right one?)';
  return '';
}
