/**
 * TLS for the service's listeners (docs/operations.md, "TLS"): the certificate files read and
 * checked once at start (a missing or unreadable file, a key that is not the certificate's, a
 * certificate without its key: an error naming the flag and the file, exit 2), then watched; a
 * changed set that checks out is given to every listener without a restart
 * (`server.setSecureContext`, and grpc-js's certificate provider), a broken one is logged and the
 * last good certificate stays, as a broken rules file keeps the last good rules.
 */
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import { createSecureContext, type PeerCertificate, type SecureContextOptions, type Server as TlsServer, type TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { InvalidOptionError } from '../../errors.js';
import { watchPath } from '../../rules/watch-path.js';
import type { TlsFiles } from '../options.js';

/** The contents of the certificate files, checked: a certificate chain, its key, the client CAs. */
export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly clientCa?: Buffer;
  /** SHA-256 fingerprint of the server certificate (the first of the chain), for logs. */
  readonly fingerprint: string;
}

/** The flag (and variable) each file comes from, for messages. */
const FLAG_OF: Readonly<Record<'cert' | 'key' | 'clientCa', string>> = {
  cert: '--tls-cert (or TOLLGATE_TLS_CERT)',
  key: '--tls-key (or TOLLGATE_TLS_KEY)',
  clientCa: '--tls-client-ca (or TOLLGATE_TLS_CLIENT_CA)',
};

function readPem(files: TlsFiles, which: keyof typeof FLAG_OF): Buffer {
  const path = files[which]!;
  try {
    return readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new InvalidOptionError(`${FLAG_OF[which]} file ${path} cannot be read (${code})`);
  }
}

/** Parses with `parse`, or throws an error naming the flag and the file. */
function parsed<T>(files: TlsFiles, which: keyof typeof FLAG_OF, what: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw new InvalidOptionError(`${FLAG_OF[which]} file ${files[which]!} is not ${what}: ${(error as Error).message}`);
  }
}

/**
 * Reads and checks the files: PEM certificate(s), a PEM private key that is the first
 * certificate's, PEM CA certificate(s). @throws {InvalidOptionError} naming the flag and the file.
 */
export function readTlsMaterial(files: TlsFiles): TlsMaterial {
  const cert = readPem(files, 'cert');
  const key = readPem(files, 'key');
  const clientCa = files.clientCa === undefined ? undefined : readPem(files, 'clientCa');
  const certificate = parsed(files, 'cert', 'a PEM certificate', () => new X509Certificate(cert));
  const privateKey: KeyObject = parsed(files, 'key', 'a PEM private key', () => createPrivateKey(key));
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new InvalidOptionError(`${FLAG_OF.key} file ${files.key} is not the private key of the certificate in ${FLAG_OF.cert} file ${files.cert} (subject ${certificate.subject.replaceAll('\n', ', ')})`);
  }
  if (clientCa !== undefined) parsed(files, 'clientCa', 'a PEM CA certificate', () => new X509Certificate(clientCa));
  // What OpenSSL itself refuses (a chain it cannot use, a key type it does not take).
  parsed(files, 'cert', 'usable with its key', () => createSecureContext({ cert, key, ...(clientCa !== undefined ? { ca: clientCa } : {}) }));
  return { cert, key, ...(clientCa !== undefined ? { clientCa } : {}), fingerprint: certificate.fingerprint256 };
}

/**
 * The secure-context options of a listener: the certificate, and with client CAs and
 * `verifyClients`, mutual TLS (a client without a certificate those CAs signed is refused in the
 * handshake).
 */
export function secureContextOptions(material: TlsMaterial, verifyClients: boolean): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean } {
  const mutual = verifyClients && material.clientCa !== undefined;
  return { cert: material.cert, key: material.key, ...(mutual ? { ca: material.clientCa } : {}), requestCert: mutual, rejectUnauthorized: mutual };
}

/** Whether a client certificate carries `name` among its subject alternative names (`DNS:name`, `URI:name`, ...). */
export function certificateNames(certificate: PeerCertificate | undefined, name: string): boolean {
  const names = (certificate?.subjectaltname ?? '').split(', ');
  return names.some((entry) => entry.slice(entry.indexOf(':') + 1) === name);
}

/**
 * --tls-client-san on a node:https or node:http2 server: a connection whose verified client
 * certificate does not carry the name is closed as soon as its handshake ends, before any request.
 */
export function requireClientName(server: TlsServer, files: TlsFiles | undefined, logger: Logger): void {
  const name = files?.clientSan;
  if (name === undefined) return;
  server.on('secureConnection', (socket: TLSSocket) => {
    const certificate = socket.getPeerCertificate();
    if (certificateNames(certificate, name)) return;
    logger.warn({ remoteAddress: socket.remoteAddress, subject: certificate.subject?.CN, names: certificate.subjectaltname }, `TLS client refused: its certificate does not name ${name} (--tls-client-san)`);
    socket.destroy();
  });
}

/**
 * Makes an HTTP server, over TLS when `tls` is given, and keeps its certificate current. Client
 * certificates are verified (with --tls-client-ca, and --tls-client-san's name required) where
 * `verifyClients`: the decision listener of `tollgate serve`, the proxy of `tollgate gateway`.
 */
export function secureServer<S extends HttpServer | HttpsServer>(tls: TlsReloader | undefined, verifyClients: boolean, make: (secure: ReturnType<typeof secureContextOptions> | undefined) => S): S {
  if (tls === undefined) return make(undefined);
  const server = make(secureContextOptions(tls.material, verifyClients));
  if (verifyClients) requireClientName(server as HttpsServer, tls.files, tls.logger);
  tls.subscribe((material) => (server as HttpsServer).setSecureContext(secureContextOptions(material, verifyClients)));
  return server;
}

/** How long a change is left to settle (a cert and its key are often written one after the other). */
const SETTLE_MS = 200;
/** Files are also read this often, in case a change was not seen (network file systems, Kubernetes' symlink swaps). */
const POLL_MS = 10_000;

/**
 * Follows the certificate files: on a change, reads and checks them again, and hands the new
 * material to each subscriber; a set that does not check out is logged and the last good stays.
 */
export class TlsReloader {
  private current: TlsMaterial;
  private readonly subscribers: ((material: TlsMaterial) => void)[] = [];
  private readonly stops: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly files: TlsFiles,
    readonly logger: Logger,
  ) {
    this.current = readTlsMaterial(files);
  }

  /** The material in force. */
  get material(): TlsMaterial {
    return this.current;
  }

  /** Calls `apply` with every new material from now on. */
  subscribe(apply: (material: TlsMaterial) => void): void {
    this.subscribers.push(apply);
  }

  /** Starts watching the files. */
  watch(): void {
    const soon = (): void => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.reload(), SETTLE_MS);
      this.timer.unref();
    };
    for (const path of [this.files.cert, this.files.key, this.files.clientCa]) if (path !== undefined) this.stops.push(watchPath(path, soon));
    const poll = setInterval(() => this.reload(), POLL_MS);
    poll.unref();
    this.stops.push(() => clearInterval(poll));
  }

  /** Reads the files again; applies them when they changed and check out. */
  reload(): void {
    let next: TlsMaterial;
    try {
      next = readTlsMaterial(this.files);
    } catch (error) {
      this.logger.error({ err: (error as Error).message, fingerprint: this.current.fingerprint }, 'TLS reload refused; the last good certificate stays in force');
      return;
    }
    if (sameMaterial(next, this.current)) return;
    const failed = this.apply(next);
    if (failed !== undefined) {
      this.logger.error({ err: failed.message, fingerprint: this.current.fingerprint }, 'TLS reload refused by a listener; the last good certificate stays in force');
      this.apply(this.current);
      return;
    }
    this.logger.info({ fingerprint: next.fingerprint, previous: this.current.fingerprint }, 'TLS certificate reloaded');
    this.current = next;
  }

  /** Hands `material` to every subscriber; the first error, if any. */
  private apply(material: TlsMaterial): Error | undefined {
    for (const subscriber of this.subscribers) {
      try {
        subscriber(material);
      } catch (error) {
        return error as Error;
      }
    }
    return undefined;
  }

  close(): void {
    clearTimeout(this.timer);
    for (const stop of this.stops.splice(0)) stop();
  }
}

function sameMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  return a.cert.equals(b.cert) && a.key.equals(b.key) && (a.clientCa === undefined ? b.clientCa === undefined : b.clientCa !== undefined && a.clientCa.equals(b.clientCa));
}
