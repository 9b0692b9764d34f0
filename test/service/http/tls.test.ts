/**
 * TLS on the service's listeners (docs/operations.md, "TLS"), with certificates made in the test by
 * `openssl` (test/support/certs.ts): HTTPS on the decision and admin listeners, gRPC over TLS with
 * the official grpc-js client on both gRPC servers, mutual TLS (the right client certificate
 * passes, none or another CA's is refused in the handshake), the certificate reloaded when its files
 * change (a new connection sees the new fingerprint, no restart; a broken replacement keeps the
 * old one), and the files checked at start (exit 2 naming the flag and the file).
 */
import { copyFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { credentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions, type GrpcServerKind } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { certificateSet, badCertificateFlags, expectRefusedAtStart, peerFingerprint } from '../../support/certs.js';
import { rateLimitClient } from '../../support/grpc-client.js';
import { capturedLogger } from '../../support/logs.js';

const CHECK = JSON.stringify({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '198.51.100.20' }] }] });

// Made once when the file loads (openssl, synchronous); removed after the last test.
const { certs, ca, otherCa, server, client, strangerClient } = certificateSet({ ca: 'tollgate-test-ca', server: 'tollgate-server', client: 'envoy-client' });
afterAll(() => certs.close());

/** A service with TLS from `files`; its log lines are kept. */
async function start(files: { cert: string; key: string; clientCa?: string; clientSan?: string }, grpcServer: GrpcServerKind = 'http2'): Promise<{ service: RunningService; logs: Record<string, unknown>[] }> {
  const { logger, logs } = capturedLogger();
  const flags = { port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', config: 'examples/rules', 'drain-delay': '0', 'grpc-server': grpcServer, 'tls-cert': files.cert, 'tls-key': files.key, ...(files.clientCa !== undefined ? { 'tls-client-ca': files.clientCa } : {}), ...(files.clientSan !== undefined ? { 'tls-client-san': files.clientSan } : {}) };
  const service = await startService(resolveServiceOptions(flags, {}), logger);
  return { service, logs };
}

interface TlsClient {
  readonly ca: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
}

/** POSTs /json over HTTPS; resolves with the status, or rejects with the TLS error. */
function postJson(port: number, tls: TlsClient, path = '/json', method = 'POST'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, method, ...tls, agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode!));
    });
    req.on('error', reject);
    req.end(method === 'POST' ? CHECK : undefined);
  });
}

describe('HTTPS and gRPC over TLS', () => {
  let service: RunningService;
  beforeAll(async () => void ({ service } = await start({ cert: server.cert, key: server.key })), 20_000);
  afterAll(async () => service?.close());

  it('answers /json over HTTPS to a client that trusts the CA, and the admin listener over HTTPS too', async () => {
    expect(await postJson(service.httpPort!, { ca: ca.certPem })).toBe(200);
    expect(await postJson(service.adminPort, { ca: ca.certPem }, '/healthz', 'GET')).toBe(200);
    expect(await postJson(service.adminPort, { ca: ca.certPem }, '/metrics', 'GET')).toBe(200);
  });

  it('is refused by a client that trusts another CA (the certificate does not verify)', async () => {
    await expect(postJson(service.httpPort!, { ca: otherCa.certPem })).rejects.toMatchObject({ code: expect.stringMatching(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER_CERT/) });
  });

  it('serves gRPC over TLS (ALPN h2) to the official grpc-js client with credentials.createSsl', async () => {
    const grpc = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem));
    try {
      const answer = await grpc.shouldRateLimit({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '198.51.100.21' }] }] });
      expect(answer.overall_code).toBe('OK');
      expect(await grpc.health()).toBe('SERVING');
    } finally {
      grpc.close();
    }
    const plain = rateLimitClient(service.grpcPort!);
    try {
      await expect(plain.health()).rejects.toMatchObject({ code: 14 }); // UNAVAILABLE: no TLS, no talk
    } finally {
      plain.close();
    }
  });
});

describe('mutual TLS (--tls-client-ca)', () => {
  for (const grpcServer of ['http2', 'grpc-js'] as const) {
    describe(`with --grpc-server ${grpcServer}`, () => {
      let service: RunningService;
      beforeAll(async () => void ({ service } = await start({ cert: server.cert, key: server.key, clientCa: ca.cert }, grpcServer)), 20_000);
      afterAll(async () => service?.close());

      it('HTTP: the handshake passes with a client certificate the CA signed, fails without one and with another CA\'s', async () => {
        expect(await postJson(service.httpPort!, { ca: ca.certPem, cert: client.certPem, key: client.keyPem })).toBe(200);
        await expect(postJson(service.httpPort!, { ca: ca.certPem })).rejects.toMatchObject({ code: expect.stringMatching(/ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED|ECONNRESET|ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE/) });
        await expect(postJson(service.httpPort!, { ca: ca.certPem, cert: strangerClient.certPem, key: strangerClient.keyPem })).rejects.toMatchObject({ code: expect.stringMatching(/ERR_SSL_TLSV1_ALERT_UNKNOWN_CA|ECONNRESET|ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE/) });
        // The admin listener serves the same certificate, without asking for a client one (its tokens guard it).
        expect(await postJson(service.adminPort, { ca: ca.certPem }, '/healthz', 'GET')).toBe(200);
      });

      it('gRPC: the right client certificate gets an answer; none, or another CA\'s, is UNAVAILABLE', async () => {
        const ok = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem, client.keyPem, client.certPem));
        const none = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem));
        const stranger = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem, strangerClient.keyPem, strangerClient.certPem));
        try {
          expect((await ok.shouldRateLimit({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '198.51.100.22' }] }] })).overall_code).toBe('OK');
          await expect(none.health()).rejects.toMatchObject({ code: 14 });
          await expect(stranger.health()).rejects.toMatchObject({ code: 14 });
        } finally {
          for (const c of [ok, none, stranger]) c.close();
        }
      });
    });
  }
});

describe('--tls-client-san: the client certificate must carry a name (envoy\'s GRPC_CLIENT_TLS_SAN)', () => {
  for (const grpcServer of ['http2', 'grpc-js'] as const) {
    it(`accepts a certificate naming it, refuses another of the same CA (--grpc-server ${grpcServer})`, async () => {
      const otherClient = certs.issue(ca, `other-client-${grpcServer}`, 'client');
      const { service, logs } = await start({ cert: server.cert, key: server.key, clientCa: ca.cert, clientSan: 'envoy-client' }, grpcServer);
      const named = { ca: ca.certPem, cert: client.certPem, key: client.keyPem };
      const unnamed = { ca: ca.certPem, cert: otherClient.certPem, key: otherClient.keyPem };
      const ok = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem, client.keyPem, client.certPem));
      const refused = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem, otherClient.keyPem, otherClient.certPem));
      try {
        expect(await postJson(service.httpPort!, named)).toBe(200);
        await expect(postJson(service.httpPort!, unnamed)).rejects.toMatchObject({ code: expect.stringMatching(/ECONNRESET|EPIPE/) });
        expect(await ok.health()).toBe('SERVING');
        // node:http2 closes the connection (UNAVAILABLE); grpc-js refuses each call (UNAUTHENTICATED).
        await expect(refused.health()).rejects.toMatchObject({ code: grpcServer === 'http2' ? 14 : 16 });
        expect(logs.some((line) => String(line.msg).includes('does not name envoy-client (--tls-client-san)'))).toBe(true);
      } finally {
        ok.close();
        refused.close();
        await service.close();
      }
    }, 30_000);
  }
});

describe('certificate reload on file change', () => {
  for (const grpcServer of ['http2', 'grpc-js'] as const) {
    it(`a new connection sees the new certificate, without a restart; a broken replacement keeps the last good one (--grpc-server ${grpcServer})`, async () => {
      const first = certs.issue(ca, `reload-a-${grpcServer}`, 'server');
      const second = certs.issue(ca, `reload-b-${grpcServer}`, 'server');
      const cert = certs.file(`live-${grpcServer}.crt`, first.certPem);
      const key = certs.file(`live-${grpcServer}.key`, first.keyPem);
      const { service, logs } = await start({ cert, key }, grpcServer);
      try {
        const ports = [service.httpPort!, service.adminPort, service.grpcPort!];
        const seen = () => Promise.all(ports.map((port, i) => peerFingerprint(port, {}, i === 2 ? ['h2'] : undefined)));
        expect(await seen()).toEqual([first.fingerprint, first.fingerprint, first.fingerprint]);

        // The key first, then the certificate: in between, the pair does not match and is refused.
        copyFileSync(second.key, key);
        copyFileSync(second.cert, cert);
        await expect.poll(seen, { timeout: 15_000, interval: 100 }).toEqual([second.fingerprint, second.fingerprint, second.fingerprint]);
        expect(logs.some((line) => line.msg === 'TLS certificate reloaded' && line.fingerprint === second.fingerprint)).toBe(true);
        // Still answering, with the new certificate, over HTTPS and gRPC.
        expect(await postJson(service.httpPort!, { ca: ca.certPem })).toBe(200);
        const grpc = rateLimitClient(service.grpcPort!, credentials.createSsl(ca.certPem));
        expect(await grpc.health()).toBe('SERVING');
        grpc.close();

        const refusedBefore = logs.filter((line) => String(line.msg).startsWith('TLS reload refused')).length;
        writeFileSync(cert, '-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n');
        await expect.poll(() => logs.filter((line) => String(line.msg).startsWith('TLS reload refused')).length, { timeout: 15_000 }).toBeGreaterThan(refusedBefore);
        const refusal = logs.findLast((line) => String(line.msg).startsWith('TLS reload refused'))!;
        expect(refusal.err).toContain(`--tls-cert (or TOLLGATE_TLS_CERT) file ${cert} is not a PEM certificate`);
        expect(refusal.fingerprint).toBe(second.fingerprint);
        expect(await seen()).toEqual([second.fingerprint, second.fingerprint, second.fingerprint]);
        expect(await postJson(service.httpPort!, { ca: ca.certPem })).toBe(200);
      } finally {
        await service.close();
      }
    }, 40_000);
  }
});

describe('the certificate files are checked at start', () => {
  it('exits 2 naming the flag and the file: missing, unreadable, not PEM, a key of another certificate, a half pair', async () => {
    const ports = { port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', 'drain-delay': '0' };
    await expectRefusedAtStart(
      badCertificateFlags(certs, { ca, server, client }),
      (flags) => startService(resolveServiceOptions({ ...ports, ...flags }, {}), capturedLogger().logger),
      (args) => ['serve', '--log-level', 'silent', '--port', '0', '--grpc-port', '0', '--admin-port', '0', ...args],
    );
  }, 120_000);
});
