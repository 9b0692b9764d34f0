/**
 * The listeners' settings of `tollgate serve` (options.ts reads them with the rest): the admin
 * listener (docs/service.md, "Planes") and the TLS certificate files (docs/operations.md, "TLS").
 */
import { isIP } from 'node:net';
import { InvalidOptionError } from '../../errors.js';
import type { WholeNumberRange } from '../../options.js';

/**
 * The certificate files of TLS (docs/operations.md, "TLS"). Every listener (decisions over HTTP,
 * gRPC, admin) serves `cert` with `key`; with `clientCa`, the decision listeners (HTTP and gRPC)
 * require each client to present a certificate that CA signed (mutual TLS), while the admin
 * listener keeps to its tokens. The files are watched and reloaded without a restart.
 */
export interface TlsFiles {
  /** PEM certificate chain, the server's own first (`--tls-cert`, `TOLLGATE_TLS_CERT`). */
  readonly cert: string;
  /** PEM private key of that certificate (`--tls-key`, `TOLLGATE_TLS_KEY`). */
  readonly key: string;
  /** PEM CA certificates clients' certificates must chain to (`--tls-client-ca`, `TOLLGATE_TLS_CLIENT_CA`). */
  readonly clientCa?: string;
  /**
   * A name clients' certificates must carry among their subject alternative names (`DNS:`, `URI:`,
   * `IP Address:` ... the part after the colon), as envoy's GRPC_CLIENT_TLS_SAN (`--tls-client-san`,
   * `TOLLGATE_TLS_CLIENT_SAN`); with `clientCa` only.
   */
  readonly clientSan?: string;
}

/** The admin listener's settings (see ServiceOptions). */
export interface PlaneSettings {
  readonly adminPort: number;
  readonly adminHost: string;
  readonly metricsToken?: string;
}

/** What a port flag may hold (`--port`, `--admin-port`, ...; the gateway's too): 0 picks a free port. */
export const PORT_RANGE = { min: 0, max: 65_535, noun: 'a port' } as const satisfies WholeNumberRange;

/** envoyproxy/ratelimit's DEBUG_PORT: the admin listener's default port. */
export const DEFAULT_ADMIN_PORT = 6070;

/** Shortest admin and metrics token: guessing one must not be practical. */
export const MIN_TOKEN_LENGTH = 16;

/**
 * The example files' placeholder tokens (`CHANGE_ME...` in deploy/tollgate.env): long enough to pass
 * the length check, so they are refused by name, or a copied example would run with a public token.
 */
export const PLACEHOLDER_TOKEN = /^change[-_]?me/i;

/** How to make a token, said wherever one is refused. */
const MAKE_ONE = 'make one with `openssl rand -hex 32`';

/** A token flag's value, at least {@link MIN_TOKEN_LENGTH} characters (`guards` says why) and not a placeholder, or undefined. */
export function token(value: (flag: string) => string | undefined, where: (flag: string) => string, flag: string, guards: string): string | undefined {
  const given = value(flag);
  if (given === undefined) return undefined;
  if (PLACEHOLDER_TOKEN.test(given)) throw new InvalidOptionError(`${where(flag)} is still the example's placeholder ${JSON.stringify(given)}: set a token of your own (${MAKE_ONE}), or remove the setting`);
  if (given.length < MIN_TOKEN_LENGTH) throw new InvalidOptionError(`${where(flag)} must be at least ${MIN_TOKEN_LENGTH} characters (${guards}): ${MAKE_ONE}`);
  return given;
}

/**
 * The admin listener's port and address and the observability token (docs/service.md, "Planes").
 * The admin port must differ from the decision and gRPC ports (0, a free port, excepted).
 */
export function planeSettings(value: (flag: string) => string | undefined, where: (flag: string) => string, ports: { port: (flag: string, fallback: number) => number; http: number; grpc: number }): PlaneSettings {
  const adminPort = ports.port('admin-port', DEFAULT_ADMIN_PORT);
  for (const [flag, taken] of [['port', ports.http], ['grpc-port', ports.grpc]] as const) {
    if (adminPort !== 0 && adminPort === taken) {
      throw new InvalidOptionError(`${where('admin-port')} is ${adminPort}, the same port as ${where(flag)}: the admin listener needs a port of its own (default ${DEFAULT_ADMIN_PORT})`);
    }
  }
  const adminHost = value('admin-bind') ?? '127.0.0.1';
  if (isIP(adminHost) === 0 && adminHost !== 'localhost') {
    throw new InvalidOptionError(`${where('admin-bind')} must be an IP address such as 127.0.0.1 (loopback, the default), 0.0.0.0 or ::, got ${JSON.stringify(adminHost)}`);
  }
  const metricsToken = token(value, where, 'metrics-token', "it guards the dashboard and /metrics, which show callers' addresses");
  return { adminPort, adminHost, ...(metricsToken !== undefined ? { metricsToken } : {}) };
}

/**
 * `--tls-cert` and `--tls-key` go together; `--tls-client-ca` needs them. The files themselves are
 * read and checked when the service starts (tls.ts), with errors naming the flag and the file.
 */
export function tlsFiles(value: (flag: string) => string | undefined, where: (flag: string) => string): TlsFiles | undefined {
  const cert = value('tls-cert');
  const key = value('tls-key');
  const clientCa = value('tls-client-ca');
  const clientSan = value('tls-client-san');
  if (clientSan !== undefined && clientCa === undefined) throw new InvalidOptionError(`${where('tls-client-san')} goes with ${where('tls-client-ca')}: a client certificate's names are checked once the CA has verified it`);
  if (cert === undefined && key === undefined) {
    if (clientCa !== undefined) throw new InvalidOptionError(`${where('tls-client-ca')} goes with ${where('tls-cert')} and ${where('tls-key')}: client certificates are asked for in a TLS handshake`);
    return undefined;
  }
  if (cert === undefined) throw new InvalidOptionError(`${where('tls-key')} is given without ${where('tls-cert')}: give the certificate file too`);
  if (key === undefined) throw new InvalidOptionError(`${where('tls-cert')} is given without ${where('tls-key')}: give the certificate's private key file too`);
  return { cert, key, ...(clientCa !== undefined ? { clientCa } : {}), ...(clientSan !== undefined ? { clientSan } : {}) };
}
