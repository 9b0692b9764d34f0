/**
 * Certificates made for a test with the `openssl` command line: a CA, server certificates for
 * 127.0.0.1 / localhost signed by it, client certificates, and a second CA whose certificates the
 * service must refuse. EC P-256 keys: quick to make. Files go in a temporary directory.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
