/**
 * The listeners' settings of `tollgate serve` (options.ts reads them with the rest): the admin
 * listener (docs/service.md, "Planes") and the TLS certificate files (docs/operations.md, "TLS").
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { InvalidOptionError } from '../../errors.js';
import { DEFAULT_ADMIN_PORT, type WholeNumberRange } from '../../options.js';

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
  readonly adminPublic: boolean;
}

/** What a port flag may hold (`--port`, `--admin-port`, ...; the gateway's too): 0 picks a free port. */
export const PORT_RANGE = { min: 0, max: 65_535, noun: 'a port' } as const satisfies WholeNumberRange;

export { DEFAULT_ADMIN_PORT };

/** Shortest admin and metrics token: guessing one must not be practical. */
export const MIN_TOKEN_LENGTH = 16;

/**
 * The example files' placeholder tokens (`CHANGE_ME...` in deploy/tollgate.env): long enough to pass
 * the length check, so they are refused by name, or a copied example would run with a public token.
 */
export const PLACEHOLDER_TOKEN = /^change[-_]?me/i;

/** How to make a token, said wherever one is refused. */
const MAKE_ONE = 'make one with `openssl rand -hex 32`';

/**
 * A token, from its flag (`--admin-token`), or the file its `-file` flag names (`--admin-token-file`,
 * which `ps` does not show, as a Kubernetes Secret mounted as a file), or their variables; at most
 * one of the two; at least {@link MIN_TOKEN_LENGTH} characters (`guards` says why) and not a
 * placeholder, or undefined.
 */
export function token(value: (flag: string) => string | undefined, where: (flag: string) => string, flag: string, guards: string): string | undefined {
  const path = value(`${flag}-file`);
  if (path !== undefined && value(flag) !== undefined) throw new InvalidOptionError(`give ${where(flag)} or ${where(`${flag}-file`)}, not both`);
  const given = path === undefined ? value(flag) : tokenFile(path, where(`${flag}-file`));
  if (given === undefined) return undefined;
  const named = where(path === undefined ? flag : `${flag}-file`);
  if (PLACEHOLDER_TOKEN.test(given)) throw new InvalidOptionError(`${named} is still the example's placeholder ${JSON.stringify(given)}: set a token of your own (${MAKE_ONE}), or remove the setting`);
  if (given.length < MIN_TOKEN_LENGTH) throw new InvalidOptionError(`${named} must be at least ${MIN_TOKEN_LENGTH} characters (${guards}): ${MAKE_ONE}`);
  return given;
}

/** A token file's content, without the whitespace around it (the newline an editor or `echo` adds). */
function tokenFile(path: string, where: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidOptionError(`${where}: ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); give a file holding the token`);
  }
  const trimmed = text.trim();
  if (/\s/.test(trimmed)) throw new InvalidOptionError(`${where}: ${path} must hold the token alone, on one line, without spaces`);
  return trimmed;
}

/** Whether `host` is a loopback address (or `localhost`): only this machine reaches it. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^(::ffff:)?127\./.test(host);
}

/** The variable of `--admin-public`. */
const SWITCH_ENV = 'TOLLGATE_ADMIN_PUBLIC';

/**
 * The admin listener's port and address and the observability token (docs/service.md, "Planes").
 * The admin port must differ from the decision and gRPC ports (0, a free port, excepted). An
 * address other than loopback needs the metrics token, or `--admin-public` saying it is meant.
 */
export function planeSettings(
  value: (flag: string) => string | undefined,
  where: (flag: string) => string,
  switchOn: (flag: string) => boolean,
  ports: { port: (flag: string, fallback: number) => number; http: number; grpc: number },
): PlaneSettings {
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
  const adminPublic = switchOn('admin-public');
  if (!isLoopback(adminHost) && metricsToken === undefined && !adminPublic) {
    throw new InvalidOptionError(
      `${where('admin-bind')} is ${adminHost}, which opens the dashboard, /metrics and /v1/events (callers' addresses and ids) to the network without a token: set ${where('metrics-token')} or ${where('metrics-token-file')}, or pass --admin-public (${SWITCH_ENV}=true) to open them on purpose`,
    );
  }
  return { adminPort, adminHost, adminPublic, ...(metricsToken !== undefined ? { metricsToken } : {}) };
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
