/**
 * Certificates made for a test with the `openssl` command line: a CA, server certificates for
 * 127.0.0.1 / localhost signed by it, client certificates, and a second CA whose certificates the
 * service must refuse. EC P-256 keys: quick to make. Files go in a temporary directory. Also what
 * the TLS tests of `serve` and `gateway` share: a new connection's view of the certificate, and
 * the bad certificate flags both refuse at start.
 */
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { expect } from 'vitest';
import { TollgateError } from '../../src/errors.js';

const OPENSSL = '/usr/bin/openssl';

/** A certificate and its key, as files and as PEM text. */
export interface CertPair {
  readonly cert: string;
  readonly key: string;
  readonly certPem: Buffer;
  readonly keyPem: Buffer;
  /** SHA-256 fingerprint, as node:tls reports a peer certificate's (`fingerprint256`). */
  readonly fingerprint: string;
}

function openssl(args: string[]): void {
  execFileSync(OPENSSL, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A directory of test certificates; `close()` removes it. */
export class TestCertificates {
  readonly dir = mkdtempSync(join(tmpdir(), 'tollgate-tls-'));
  private serial = 1;

  /** A self-signed CA named `name`. */
  ca(name: string): CertPair {
    const cert = join(this.dir, `${name}.crt`);
    const key = join(this.dir, `${name}.key`);
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
    return pair(cert, key);
  }

  /** A certificate `name` signed by `ca`: a server one (for 127.0.0.1 and localhost) or a client one. */
  issue(ca: CertPair, name: string, use: 'server' | 'client'): CertPair {
    const cert = join(this.dir, `${name}.crt`);
    const key = join(this.dir, `${name}.key`);
    const csr = join(this.dir, `${name}.csr`);
    const extensions = join(this.dir, `${name}.ext`);
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${name}`]);
    writeFileSync(extensions, use === 'server' ? 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' : `subjectAltName=DNS:${name}\nextendedKeyUsage=clientAuth\n`);
    openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', String(this.serial++), '-days', '2', '-out', cert, '-extfile', extensions]);
    return pair(cert, key);
  }

  /** Writes `text` to a file in the directory; returns its path. */
  file(name: string, text: string | Buffer): string {
    const path = join(this.dir, name);
    writeFileSync(path, text);
    return path;
  }

  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function pair(cert: string, key: string): CertPair {
  const certPem = readFileSync(cert);
  return { cert, key, certPem, keyPem: readFileSync(key), fingerprint: new X509Certificate(certPem).fingerprint256 };
}

/**
 * A new TLS connection's view of the server certificate (its SHA-256 fingerprint), or the handshake's
 * error code. With TLS 1.3 a refused client certificate shows after the handshake: it waits a little.
 */
export function peerFingerprint(port: number, tls: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {}, alpn?: string[]): Promise<string> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...tls, ...(alpn !== undefined ? { ALPNProtocols: alpn } : {}) }, () => {
      setTimeout(() => {
        const fingerprint = socket.getPeerCertificate().fingerprint256;
        socket.destroy();
        resolve(fingerprint);
      }, 50);
    });
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(`error: ${error.code ?? error.message}`));
  });
}

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;

/** How long one `tollgate` run may take: a start on a busy machine loads the whole CLI in seconds. */
const CLI_TIMEOUT_MS = 60_000;
/** Runs at once by {@link cliExits}: each is a Node start, CPU-bound; more than the cores only queue. */
const CLI_CONCURRENCY = 2;

/** Runs the built `tollgate` with `args`; resolves with its exit code and stderr (which says so if it was killed for taking too long). */
export function cliExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { timeout: CLI_TIMEOUT_MS }, (error, _stdout, stderr) => {
      const killed = error !== null && (error as { killed?: boolean }).killed === true;
      resolve({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stderr: killed ? `${stderr}\n(killed after ${CLI_TIMEOUT_MS} ms)` : stderr });
    });
  });
}

/** {@link cliExit} for each of `runs`, {@link CLI_CONCURRENCY} at a time; the results in the order of `runs`. */
export async function cliExits(runs: readonly string[][]): Promise<{ code: number | null; stderr: string }[]> {
  const results: { code: number | null; stderr: string }[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < runs.length) {
      const index = next++;
      results[index] = await cliExit(runs[index]!);
    }
  };
  await Promise.all(Array.from({ length: CLI_CONCURRENCY }, worker));
  return results;
}

/** `--name value` pairs as the flag values a command's parser hands its options resolver. */
function flagValues(args: readonly string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 2) values[args[i]!.replace(/^--/, '')] = args[i + 1]!;
  return values;
}

/**
 * Each of `cases` refused at start with its message, a TollgateError (which the command turns into
 * exit 2): every case through `start` in this process (resolving the flags and starting, as the command does; a start that succeeds is closed and
 * fails the test), and the first also through the built CLI with `cliArgs`, which must exit 2 with
 * the message on stderr: the command maps every TollgateError alike, so one Node start proves that
 * mapping and the ten cases need no process each.
 */
export async function expectRefusedAtStart(
  cases: readonly [string[], string][],
  start: (flags: Record<string, string>) => Promise<{ close(): Promise<unknown> }>,
  cliArgs: (args: string[]) => string[],
): Promise<void> {
  for (const [args, message] of cases) {
    const outcome = await (async () => start(flagValues(args)))().then(
      async (running) => {
        await running.close();
        return 'started';
      },
      (error: unknown) => error,
    );
    expect(outcome, args.join(' ')).toBeInstanceOf(TollgateError);
    expect((outcome as Error).message, args.join(' ')).toContain(message);
  }
  const [first] = cases;
  const { code, stderr } = await cliExit(cliArgs(first![0]));
  expect(stderr, first![0].join(' ')).toContain(first![1]);
  expect(code, first![0].join(' ')).toBe(2);
}

/**
 * Certificate flags a command must refuse at start (exit 2), each with the message that names the
 * flag and the file: missing, unreadable, not PEM, a key of another certificate, a half pair.
 */
export function badCertificateFlags(certs: TestCertificates, { ca, server, client }: { ca: CertPair; server: CertPair; client: CertPair }): [string[], string][] {
  const garbage = certs.file('garbage.pem', 'hello\n');
  return [
    [['--tls-cert', `${certs.dir}/missing.crt`, '--tls-key', server.key], `--tls-cert (or TOLLGATE_TLS_CERT) file ${certs.dir}/missing.crt cannot be read (ENOENT)`],
    [['--tls-cert', server.cert, '--tls-key', certs.dir], `--tls-key (or TOLLGATE_TLS_KEY) file ${certs.dir} cannot be read (EISDIR)`],
    [['--tls-cert', garbage, '--tls-key', server.key], `--tls-cert (or TOLLGATE_TLS_CERT) file ${garbage} is not a PEM certificate`],
    [['--tls-cert', server.cert, '--tls-key', garbage], `--tls-key (or TOLLGATE_TLS_KEY) file ${garbage} is not a PEM private key`],
    [['--tls-cert', server.cert, '--tls-key', client.key], `--tls-key (or TOLLGATE_TLS_KEY) file ${client.key} is not the private key of the certificate in --tls-cert (or TOLLGATE_TLS_CERT) file ${server.cert}`],
    [['--tls-cert', server.cert, '--tls-key', server.key, '--tls-client-ca', garbage], `--tls-client-ca (or TOLLGATE_TLS_CLIENT_CA) file ${garbage} is not a PEM CA certificate`],
    [['--tls-cert', server.cert], '--tls-cert (or TOLLGATE_TLS_CERT) is given without --tls-key (or TOLLGATE_TLS_KEY)'],
    [['--tls-key', server.key], '--tls-key (or TOLLGATE_TLS_KEY) is given without --tls-cert (or TOLLGATE_TLS_CERT)'],
    [['--tls-client-ca', ca.cert], '--tls-client-ca (or TOLLGATE_TLS_CLIENT_CA) goes with --tls-cert'],
    [['--tls-cert', server.cert, '--tls-key', server.key, '--tls-client-san', 'envoy'], '--tls-client-san (or TOLLGATE_TLS_CLIENT_SAN) goes with --tls-client-ca'],
  ];
}

/** The certificates a TLS test needs: a CA, another CA, a server and a client of the first, a client of the other. */
export interface CertificateSet {
  readonly certs: TestCertificates;
  readonly ca: CertPair;
  readonly otherCa: CertPair;
  readonly server: CertPair;
  readonly client: CertPair;
  readonly strangerClient: CertPair;
}

/** Makes a {@link CertificateSet}; `names` label the CA, the server and the client in their subjects. */
export function certificateSet(names: { ca: string; server: string; client: string }): CertificateSet {
  const certs = new TestCertificates();
  const ca = certs.ca(names.ca);
  const otherCa = certs.ca('other-ca');
  return {
    certs, ca, otherCa,
    server: certs.issue(ca, names.server, 'server'),
    client: certs.issue(ca, names.client, 'client'),
    strangerClient: certs.issue(otherCa, 'stranger-client', 'client'),
  };
}
