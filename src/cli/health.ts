/**
 * `tollgate health`: asks a running `tollgate serve` on this host whether it is alive, for a
 * container's health check. It finds the service through the address file the service wrote
 * (`--address-file`), so it follows the listeners really opened: a `--port` given on the command
 * line, a port chosen for 0, HTTPS. Exit codes are Docker's HEALTHCHECK ones: 0 healthy, 1 not
 * (Docker reserves 2, so a usage error is 1 too).
 */
import { readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { parseArgs } from 'node:util';
import { checkDuration } from '../options.js';
// A type only: a health check runs every few seconds and must not load the service (health-check.ts).
import type { ListenerAddresses } from '../service/index.js';

/** Where the answer and the complaints go. */
export interface HealthOutput {
  stdout(text: string): void;
  stderr(text: string): void;
}

export const HEALTH_USAGE = `Usage: tollgate health [--address-file FILE] [--timeout DURATION]

Asks the tollgate serve of this host for GET /healthz, at the addresses it wrote to its
--address-file (FILE, else TOLLGATE_ADDRESS_FILE): the decision listener, or the admin listener
when the decision listeners require client certificates (--tls-client-ca). HTTPS certificates are
not verified: the check is of the process on this host, not of its name.
  --address-file FILE   the file serve --address-file writes (TOLLGATE_ADDRESS_FILE)
  --timeout DURATION    longest wait for the answer, with its unit (2s)
Exit 0 when /healthz answers 200, 1 otherwise (also on a usage error: Docker reserves 2).
`;

/** Default `--timeout`: under Docker's default HEALTHCHECK timeout (30 s) and the image's (3 s). */
const DEFAULT_TIMEOUT_MS = 2_000;

/** Reads an address file; an error names the file and what is wrong with it. */
export function readAddressFile(path: string): ListenerAddresses {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new Error(missing ? `no address file at ${path}: the service has not started listening yet, or runs without --address-file ${path}` : `address file ${path} cannot be read: ${(error as Error).message}`, { cause: error });
  }
  const addresses = parsed as Partial<ListenerAddresses> | null;
  if (typeof addresses?.admin !== 'string' || typeof addresses.pid !== 'number' || typeof addresses.clientCertificates !== 'boolean') {
    throw new Error(`address file ${path} is not one tollgate serve wrote: it needs pid, admin and clientCertificates`);
  }
  return addresses as ListenerAddresses;
}

/** The URL a health check asks: the decision listener's /healthz, unless it requires a client certificate. */
export function healthUrl(addresses: ListenerAddresses): string {
  const base = addresses.http !== undefined && !addresses.clientCertificates ? addresses.http : addresses.admin;
  return `${base}/healthz`;
}

/** GET `url`: the status, or the network error's message. */
function ask(url: string, timeoutMs: number): Promise<{ status: number } | { error: string }> {
  return new Promise((resolve) => {
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    // Loopback to our own service: its certificate names the service for its clients, not this host.
    const request = get(url, { timeout: timeoutMs, rejectUnauthorized: false, agent: false }, (response) => {
      response.resume();
      resolve({ status: response.statusCode ?? 0 });
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', (error) => resolve({ error: error.message }));
  });
}

/** `tollgate health ARGS`: 0 when the service answers /healthz with 200, else 1 with the reason on stderr. */
export async function runHealthCommand(args: string[], env: NodeJS.ProcessEnv, output: HealthOutput): Promise<number> {
  let url: string;
  let timeoutMs: number;
  try {
    const { values } = parseArgs({ args, allowPositionals: false, options: { 'address-file': { type: 'string' }, timeout: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
    if (values.help === true) {
      output.stdout(HEALTH_USAGE);
      return 0;
    }
    const file = values['address-file'] ?? env.TOLLGATE_ADDRESS_FILE;
    if (file === undefined || file === '') throw new Error('give --address-file FILE (or TOLLGATE_ADDRESS_FILE): the file tollgate serve --address-file writes');
    timeoutMs = values.timeout === undefined ? DEFAULT_TIMEOUT_MS : checkDuration(values.timeout, '--timeout');
    url = healthUrl(readAddressFile(file));
  } catch (error) {
    output.stderr(`tollgate health: ${(error as Error).message}\n`);
    return 1;
  }
  const answer = await ask(url, timeoutMs);
  if ('status' in answer && answer.status === 200) {
    output.stdout(`healthy: ${url}\n`);
    return 0;
  }
  output.stderr(`tollgate health: ${url}: ${'status' in answer ? `answered ${answer.status}` : answer.error}\n`);
  return 1;
}
