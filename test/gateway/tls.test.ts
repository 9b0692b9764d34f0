/**
 * TLS on `tollgate gateway` (docs/gateway.md, "TLS"), with certificates made in the test by
 * `openssl` (test/support/certs.ts): HTTPS through the proxy to a plain upstream (X-Forwarded-Proto
 * https), the admin listener on the same certificate; mutual TLS on the proxy (right certificate,
 * none, another CA's; --tls-client-san); the certificate reloaded without a restart (a new
 * connection sees the new fingerprint on both listeners); bad files refused at start (exit 2
 * naming the flag and the file); and https:// upstreams: a private CA trusted through `tls.ca_file`,
 * refused without it, verified under `server_name` and never under the client's `Host`, and
 * reached by deferred requests too (Redis), whose scheme comes from their socket, never a header.
 */
import { copyFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer, request as httpsRequest, type Server as HttpsServer } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certificateSet, badCertificateFlags, expectRefusedAtStart, peerFingerprint, type CertPair } from '../support/certs.js';
import { resolveGatewayOptions } from '../../src/gateway/options.js';
import { startGateway } from '../../src/gateway/server.js';
import type { Logger } from 'pino';
import { capturedLogger } from '../support/logs.js';
import { send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';
import { useRedisServer } from '../support/redis-topologies.js';
import type { DeferredEntry } from '../../src/gateway/defer/index.js';
import { deliveryHeaders, replayFacts, storedHeaders } from '../../src/gateway/defer/replay.js';

// Made once when the file loads (openssl, synchronous); removed after the last test.
const { certs, ca, otherCa, server, client, strangerClient } = certificateSet({ ca: 'gateway-test-ca', server: 'gateway-server', client: 'app-client' });
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream?.close();
  certs.close();
});

const ROUTES = (upstreamUrl: string) => `listen: 0\nupstreams: { app: "${upstreamUrl}" }\nroutes:\n  - match: { prefix: / }\n    upstream: app\n`;

/** The gateway with TLS flags, in this process, proxying to the plain upstream. */
function startTls(flags: Record<string, string>, config = ROUTES(upstream.url), logger?: Logger): Promise<TestGateway> {
  return startTestGateway(config, undefined, { flags, ...(logger !== undefined ? { logger } : {}) });
}

interface TlsClient {
  readonly ca: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
}

/** One GET over HTTPS on a fresh connection; resolves with the status and body, or rejects with the TLS error. */
function get(port: number, path: string, tls: TlsClient, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, ...tls, headers, agent: false }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode!, body, headers: response.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HTTPS on the proxy and the admin listener', () => {
  let running: TestGateway;
  // :scheme (envoy's pseudo-header) says https: every route below asks for it, and the plain-only one leads nowhere.
  const config = () => `listen: 0
upstreams: { app: "${upstream.url}", nowhere: "http://127.0.0.1:9" }
routes:
  - { match: { prefix: /plain-only, headers: [{ name: ":scheme", exact_match: http }] }, upstream: nowhere }
  - { match: { prefix: /, headers: [{ name: ":scheme", exact_match: https }] }, upstream: app }
`;
  beforeAll(async () => void (running = await startTls({ 'tls-cert': server.cert, 'tls-key': server.key }, config())), 20_000);
  afterAll(async () => running?.close());

  it('forwards over HTTPS to a plain upstream for a client that trusts the CA, saying X-Forwarded-Proto: https', async () => {
    const answer = await get(running.gateway.port, '/hello', { ca: ca.certPem });
    expect(answer).toMatchObject({ status: 200, body: 'upstream GET /hello' });
    expect(upstream.requests.at(-1)!.headers['x-forwarded-proto']).toBe('https');
    expect((await get(running.gateway.adminPort, '/healthz', { ca: ca.certPem })).status).toBe(200);
    expect((await get(running.gateway.port, '/plain-only', { ca: ca.certPem })).status).toBe(200); // the https route, not the plain one
    expect(upstream.requests.at(-1)!.url).toBe('/plain-only');
  });

  it('is refused by a client that trusts another CA, and does not speak plain HTTP', async () => {
    await expect(get(running.gateway.port, '/hello', { ca: otherCa.certPem })).rejects.toMatchObject({ code: expect.stringMatching(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER_CERT/) });
    await expect(get(running.gateway.adminPort, '/healthz', { ca: otherCa.certPem })).rejects.toMatchObject({ code: expect.stringMatching(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER_CERT/) });
    // A plain HTTP request gets no HTTP answer from a TLS listener.
    await expect(send(`http://127.0.0.1:${running.gateway.port}/hello`)).rejects.toMatchObject({ code: expect.stringMatching(/ECONNRESET|HPE_/) });
  });
});

describe('mutual TLS on the proxy (--tls-client-ca, --tls-client-san)', () => {
  it('passes a client certificate the CA signed, refuses none and another CA\'s; the admin listener asks for none', async () => {
    const running = await startTls({ 'tls-cert': server.cert, 'tls-key': server.key, 'tls-client-ca': ca.cert });
    try {
      expect((await get(running.gateway.port, '/m', { ca: ca.certPem, cert: client.certPem, key: client.keyPem })).status).toBe(200);
      await expect(get(running.gateway.port, '/m', { ca: ca.certPem })).rejects.toMatchObject({ code: expect.stringMatching(/ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED|ECONNRESET|ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE/) });
      await expect(get(running.gateway.port, '/m', { ca: ca.certPem, cert: strangerClient.certPem, key: strangerClient.keyPem })).rejects.toMatchObject({ code: expect.stringMatching(/ERR_SSL_TLSV1_ALERT_UNKNOWN_CA|ECONNRESET|ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE/) });
      expect((await get(running.gateway.adminPort, '/healthz', { ca: ca.certPem })).status).toBe(200);
    } finally {
      await running.close();
    }
  }, 20_000);

  it('with --tls-client-san, closes a connection whose certificate (of the same CA) does not carry the name', async () => {
    const unnamed = certs.issue(ca, 'unnamed-client', 'client');
    const running = await startTls({ 'tls-cert': server.cert, 'tls-key': server.key, 'tls-client-ca': ca.cert, 'tls-client-san': 'app-client' });
    try {
      expect((await get(running.gateway.port, '/san', { ca: ca.certPem, cert: client.certPem, key: client.keyPem })).status).toBe(200);
      await expect(get(running.gateway.port, '/san', { ca: ca.certPem, cert: unnamed.certPem, key: unnamed.keyPem })).rejects.toMatchObject({ code: expect.stringMatching(/ECONNRESET|EPIPE/) });
    } finally {
      await running.close();
    }
  }, 20_000);
});

describe('certificate reload on file change', () => {
  it('a new connection to the proxy and to the admin listener sees the new certificate, without a restart; a broken one keeps it', async () => {
    const first = certs.issue(ca, 'reload-a', 'server');
    const second = certs.issue(ca, 'reload-b', 'server');
    const cert = certs.file('live.crt', first.certPem);
    const key = certs.file('live.key', first.keyPem);
    const { logger, logs } = capturedLogger();
    const running = await startTls({ 'tls-cert': cert, 'tls-key': key }, undefined, logger);
    const refusals = (): number => logs.filter((line) => String(line.msg).startsWith('TLS reload refused')).length;
    try {
      const seen = () => Promise.all([running.gateway.port, running.gateway.adminPort].map((port) => peerFingerprint(port)));
      expect(await seen()).toEqual([first.fingerprint, first.fingerprint]);
      copyFileSync(second.key, key);
      copyFileSync(second.cert, cert);
      await expect.poll(seen, { timeout: 15_000, interval: 100 }).toEqual([second.fingerprint, second.fingerprint]);
      expect((await get(running.gateway.port, '/after-reload', { ca: ca.certPem })).status).toBe(200);

      writeFileSync(cert, '-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n');
      // The broken file is read and refused (logged): the certificate stays.
      const refusedBefore = refusals();
      await expect.poll(refusals, { timeout: 15_000 }).toBeGreaterThan(refusedBefore);
      expect(await seen()).toEqual([second.fingerprint, second.fingerprint]);
      expect((await get(running.gateway.port, '/still', { ca: ca.certPem })).status).toBe(200);
    } finally {
      await running.close();
    }
  }, 40_000);
});

describe('the certificate files are checked at start', () => {
  it('exits 2 naming the flag and the file, as serve does', async () => {
    const config = certs.file('exit-gateway.yaml', ROUTES('http://127.0.0.1:9'));
    const flags = { config, port: '0', 'admin-port': '0', host: '127.0.0.1', 'drain-delay': '0' };
    await expectRefusedAtStart(
      badCertificateFlags(certs, { ca, server, client }),
      (tls) => startGateway(resolveGatewayOptions({ ...flags, ...tls }, {}), capturedLogger().logger),
      (args) => ['gateway', '--config', config, '--log-level', 'silent', '--port', '0', '--admin-port', '0', ...args],
    );
  }, 120_000);
});

describe('https:// upstreams', () => {
  let upstreamCa: CertPair;
  let secure: HttpsServer;
  let securePort: number;
  /** The SNI each upstream connection carried (false: none). */
  const serverNames: (string | false | null)[] = [];
  /** The headers of each request the upstream received. */
  const received: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    upstreamCa = certs.ca('upstream-private-ca');
    const cert = certs.issue(upstreamCa, 'private-upstream', 'server'); // names 127.0.0.1 and localhost
    secure = createHttpsServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
      received.push(req.headers);
      req.resume();
      res.end(`secure upstream ${req.url} host=${req.headers.host}`);
    });
    secure.on('secureConnection', (socket: TLSSocket) => serverNames.push(socket.servername));
    await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', resolve));
    securePort = (secure.address() as AddressInfo).port;
  }, 20_000);
  afterAll(async () => {
    secure?.closeAllConnections();
    await new Promise((resolve) => secure?.close(resolve));
  });

  it('trusts the private CA of tls.ca_file, refuses the upstream without it (502), and checks server_name', async () => {
    const origin = `https://127.0.0.1:${securePort}`;
    const config = `listen: 0
upstreams:
  private: { url: "${origin}", tls: { ca_file: ${upstreamCa.cert} } }
  named: { url: "${origin}", tls: { ca_file: ${upstreamCa.cert}, server_name: localhost } }
  misnamed: { url: "${origin}", tls: { ca_file: ${upstreamCa.cert}, server_name: other.internal } }
  untrusted: "${origin}"
routes:
  - { match: { prefix: /private }, upstream: private }
  - { match: { prefix: /named }, upstream: named }
  - { match: { prefix: /misnamed }, upstream: misnamed }
  - { match: { prefix: /untrusted }, upstream: untrusted }
`;
    const running = await startTestGateway(config, undefined);
    try {
      expect(await send(running.url('/private/a'))).toMatchObject({ status: 200, body: expect.stringContaining('secure upstream /private/a') });
      const untrusted = await send(running.url('/untrusted'));
      expect(untrusted.status).toBe(502);
      expect(untrusted.body).toMatch(/upstream \\?"untrusted\\?" failed: (UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT)/);

      serverNames.length = 0;
      expect(await send(running.url('/named/b'))).toMatchObject({ status: 200 });
      expect(serverNames).toEqual(['localhost']);
      const misnamed = await send(running.url('/misnamed'));
      expect(misnamed.status).toBe(502);
      expect(misnamed.body).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
    } finally {
      await running.close();
    }
  }, 20_000);

  it("verifies the upstream under its own name whatever the client's Host, and keeps one connection for all hosts", async () => {
    const config = `listen: 0\nupstreams:\n  private: { url: "https://127.0.0.1:${securePort}", tls: { ca_file: ${upstreamCa.cert} } }\nroutes:\n  - { match: { prefix: / }, upstream: private }\n`;
    const running = await startTestGateway(config, undefined);
    try {
      serverNames.length = 0;
      // undici would take SNI and the checked name from Host: api.example.com is not on the certificate.
      for (const host of ['api.example.com', 'www.example.org', 'api.example.com']) {
        const answer = await send(running.url('/h'), { headers: { host } });
        expect(answer).toMatchObject({ status: 200, body: `secure upstream /h host=${host}` });
      }
      // An address URL without server_name: no SNI (RFC 6066), the certificate's IP entry is checked; one connection served all three.
      expect(serverNames).toEqual([false]);
    } finally {
      await running.close();
    }
  }, 20_000);

  describe('deferred requests (on_limit: defer) behind an HTTPS gateway', () => {
    const redis = useRedisServer();

    it('are delivered to the private-CA upstream through its pool, with X-Forwarded-Proto: https', async () => {
      const rules = 'domain: jobs\ndescriptors:\n  - { key: generic_key, value: all, rate_limit: { unit: second, requests_per_unit: 2, algorithm: token-bucket, burst: 1 } }\n';
      const config = `listen: 0
upstreams:
  private: { url: "https://127.0.0.1:${securePort}", tls: { ca_file: ${upstreamCa.cert} } }
routes:
  - match: { prefix: /jobs }
    upstream: private
    domain: jobs
    on_limit: defer
    rate_limits: [{ actions: [{ generic_key: { descriptor_value: all } }] }]
`;
      const running = await startTestGateway(config, rules, { flags: { redis: redis.url, 'tls-cert': server.cert, 'tls-key': server.key } });
      try {
        const trust = { ca: ca.certPem };
        expect((await get(running.gateway.port, '/jobs/1', trust)).status).toBe(200);
        const deferred = await get(running.gateway.port, '/jobs/2', trust);
        expect(deferred.status).toBe(202);
        const { ticket, status_url: statusUrl } = JSON.parse(deferred.body) as { ticket: string; status_url: string };
        await expect.poll(async () => (JSON.parse((await get(running.gateway.port, statusUrl, trust)).body) as { state: string }).state, { timeout: 10_000, interval: 100 }).toBe('delivered');
        const replay = received.find((headers) => headers['idempotency-key'] === ticket)!;
        expect(replay['x-forwarded-proto']).toBe('https');
        expect(replay['x-tollgate-client-scheme']).toBeUndefined();
      } finally {
        await running.close();
      }
    }, 30_000);
  });
});

describe('a deferred request over TLS', () => {
  it("keeps a deferred request's scheme from its socket, never from a client's header", () => {
    const entry = (encrypted: boolean, raw: string[]): DeferredEntry => {
      const req = { rawHeaders: raw, socket: { remoteAddress: '192.0.2.7', encrypted } } as unknown as Parameters<typeof storedHeaders>[0];
      return { method: 'GET', path: '/', headers: storedHeaders(req), body: Buffer.alloc(0), queueName: 'q', ticket: 't', id: '1-0', enqueuedAt: 0, attempt: 1 } as DeferredEntry;
    };
    const proto = (stored: DeferredEntry) => deliveryHeaders(stored).find(([name]) => name === 'x-forwarded-proto')![1];
    const spoofed = entry(false, ['Host', 'a.example', 'X-Tollgate-Client-Scheme', 'https']);
    expect(replayFacts(spoofed).socket.encrypted).toBe(false);
    expect(proto(spoofed)).toBe('http');
    expect(proto(entry(true, ['Host', 'a.example']))).toBe('https');
    expect(deliveryHeaders(entry(true, [])).some(([name]) => name.toLowerCase() === 'x-tollgate-client-scheme')).toBe(false);
  });
});
