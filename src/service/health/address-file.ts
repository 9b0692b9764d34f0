/**
 * The address file (`--address-file FILE`): once every listener is up, `tollgate serve` writes
 * where they listen, as URLs a process on the same host can reach; `tollgate health` reads it. A
 * health check then follows the listeners the service really opened (a `--port` given on the
 * command line, a port chosen for 0, TLS) instead of guessing them from the environment. The
 * reader is src/cli/health.ts.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { InvalidOptionError } from '../../errors.js';

/** What the address file holds. */
export interface ListenerAddresses {
  /** The process that wrote it. */
  readonly pid: number;
  /** The decision listener, e.g. `https://127.0.0.1:8080` (absent: the gateway, which has none). */
  readonly http?: string;
  /** The admin listener (health, metrics, dashboard, admin API). */
  readonly admin: string;
  /** The gRPC listener, `host:port` (absent without one). */
  readonly grpc?: string;
  /** Whether the decision listeners ask clients for a certificate (`--tls-client-ca`): a health check without one asks the admin listener. */
  readonly clientCertificates: boolean;
}

/** Where a process on this host reaches a listener bound to `host`: the loopback for a wildcard address. */
export function reachableHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** `http://host:port` or `https://...`, as a client on this host reaches it. */
export function listenerUrl(host: string, port: number, tls: boolean): string {
  return `${tls ? 'https' : 'http'}://${reachableHost(host)}:${port}`;
}

/**
 * Writes `addresses` to `path` whole (a temporary file renamed over it), so a reader never sees
 * half of it. A path that cannot be written is a bad setting: the error names the flag.
 */
export function writeAddressFile(path: string, addresses: ListenerAddresses): void {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, `${JSON.stringify(addresses)}\n`, { mode: 0o644 });
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw new InvalidOptionError(`--address-file (or TOLLGATE_ADDRESS_FILE) ${path} cannot be written: ${(error as Error).message}; give a path in a writable directory (e.g. /tmp), or leave it unset`);
  }
}

/** Removes the address file at stop, when this process wrote the one there (with --workers, another worker may have since). */
export function removeAddressFile(path: string): void {
  try {
    if ((JSON.parse(readFileSync(path, 'utf8')) as Partial<ListenerAddresses>).pid === process.pid) rmSync(path, { force: true });
  } catch {
    // Gone or replaced by something else: nothing of ours to remove.
  }
}
