/**
 * Connections hoarded on the gRPC listener: silent TCP connections were never closed (11.5k held),
 * and 20 connections × 1,000 half-sent calls were held indefinitely (+158 MB, other callers timing
 * out). The node:http2 listener now closes a connection that sends nothing after the headers
 * timeout, answers a call whose request has not arrived within the receive timeout and resets it,
 * sends GOAWAY to a connection idle or too old (cutting the old one after its grace), and bounds
 * calls per connection and connections. Real sockets over loopback, limits shrunk through the flags.
 */
import { connect, type ClientHttp2Session } from 'node:http2';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { GRPC_STATUS } from '../../src/service/grpc/listener.js';
import { HEALTH_CHECK_PATH, RawGrpcSession, SHOULD_RATE_LIMIT_PATH, grpcFrame, rateLimitRequest } from '../support/grpc-raw.js';
import { closedBy, opened } from '../support/sockets.js';

const HEADERS_TIMEOUT_MS = 300;
const RECEIVE_TIMEOUT_MS = 400;
const IDLE_TIMEOUT_MS = 600;
const MAX_AGE_MS = 900;
const AGE_GRACE_MS = 300;
const MAX_STREAMS = 5;
const MAX_CONNECTIONS = 12;
/** What a loaded 2-core machine may add to a timer before the server acts on it. */
const SLACK_MS = 2_000;

/**
 * An HTTP/2 session to the gRPC port, resolved once the server's SETTINGS arrive (a connection the
 * server drops at accept is refused); `goaway` and `closed` resolve with when those came.
 */
async function session(port: number): Promise<{ session: ClientHttp2Session; goaway: Promise<number>; closed: Promise<number> }> {
  const started = Date.now();
  const client = connect(`http://127.0.0.1:${port}`);
  client.on('error', () => {});
  const goaway = new Promise<number>((resolve) => client.once('goaway', () => resolve(Date.now() - started)));
  const closed = new Promise<number>((resolve) => client.once('close', () => resolve(Date.now() - started)));
  await new Promise<void>((resolve, reject) => {
    client.once('remoteSettings', () => resolve());
    client.once('close', () => reject(new Error('closed before the server spoke')));
  });
  return { session: client, goaway, closed };
}

/** Opens a ShouldRateLimit call that sends half a message and never ends; resolves with its grpc-status when the server ends it. */
function halfSentCall(client: ClientHttp2Session): Promise<number | undefined> {
  const stream = client.request({ ':method': 'POST', ':path': SHOULD_RATE_LIMIT_PATH, 'content-type': 'application/grpc', te: 'trailers' });
  stream.on('error', () => {});
  let status: number | undefined;
  stream.on('response', (headers) => (status = headers['grpc-status'] === undefined ? status : Number(headers['grpc-status'])));
  stream.on('trailers', (trailers) => (status = Number(trailers['grpc-status'])));
  stream.resume();
  stream.write(grpcFrame(rateLimitRequest('api', [{ user: 'hoarder' }])).subarray(0, 8));
  return new Promise((resolve) => stream.once('close', () => resolve(status)));
}

/** A health Check on its own connection: what a victim gets during the attack. */
async function healthCheck(port: number): Promise<number | undefined> {
  const raw = new RawGrpcSession(port);
  try {
    return (await raw.call({ path: HEALTH_CHECK_PATH, chunks: [grpcFrame(Buffer.alloc(0))] })).status;
  } finally {
    raw.close();
  }
}

describe('connections hoarded on the gRPC listener', () => {
  let service: RunningService;
  let port: number;

  beforeAll(async () => {
    const flags = {
      port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', config: 'examples/rules',
      'headers-timeout': `${HEADERS_TIMEOUT_MS}ms`, 'grpc-receive-timeout': `${RECEIVE_TIMEOUT_MS}ms`, 'grpc-idle-timeout': `${IDLE_TIMEOUT_MS}ms`,
      'grpc-max-connection-age': `${MAX_AGE_MS}ms`, 'grpc-max-connection-age-grace': `${AGE_GRACE_MS}ms`,
      'grpc-max-concurrent-streams': String(MAX_STREAMS), 'grpc-max-connections': String(MAX_CONNECTIONS),
    };
    service = await startService(resolveServiceOptions(flags, {}), pino({ level: 'silent' }));
    port = service.grpcPort!;
  }, 20_000);
  afterAll(async () => service?.close());

  it('closes silent TCP connections after the headers timeout', async () => {
    const started = Date.now();
    const sockets = await Promise.all(Array.from({ length: 10 }, () => opened(port)));
    const closes = await Promise.all(sockets.map((socket) => closedBy(socket, started)));
    for (const { afterMs, received } of closes) {
      // Nothing but the server's own HTTP/2 SETTINGS, which it sends on accepting.
      expect(Buffer.from(received, 'latin1')[3]).toBe(0x04);
      expect(afterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
      expect(afterMs).toBeLessThan(HEADERS_TIMEOUT_MS + SLACK_MS);
    }
  }, 10_000);

  it('ends half-sent calls after the receive timeout with DEADLINE_EXCEEDED, and advertises the bound on calls per connection', async () => {
    const attackers = await Promise.all([session(port), session(port)]);
    for (const { session: client } of attackers) expect(client.remoteSettings.maxConcurrentStreams).toBe(MAX_STREAMS);
    const started = Date.now();
    const calls = attackers.flatMap(({ session: client }) => Array.from({ length: MAX_STREAMS }, () => halfSentCall(client)));
    expect(await healthCheck(port)).toBe(GRPC_STATUS.OK);
    const statuses = await Promise.all(calls);
    const tookMs = Date.now() - started;
    expect(statuses).toEqual(calls.map(() => GRPC_STATUS.DEADLINE_EXCEEDED));
    expect(tookMs).toBeGreaterThanOrEqual(RECEIVE_TIMEOUT_MS - 50);
    expect(tookMs).toBeLessThan(RECEIVE_TIMEOUT_MS + SLACK_MS);
    for (const { session: client } of attackers) client.destroy();
  }, 10_000);

  it('sends GOAWAY to a connection left idle after the idle timeout, and closes it', async () => {
    const idle = await session(port);
    const raw = idle.session.request({ ':method': 'POST', ':path': HEALTH_CHECK_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    raw.resume();
    raw.end(grpcFrame(Buffer.alloc(0)));
    await new Promise((resolve) => raw.once('close', resolve));
    const lastCallAt = Date.now();
    await idle.goaway;
    await idle.closed;
    const idleMs = Date.now() - lastCallAt;
    expect(idleMs).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 100);
    expect(idleMs).toBeLessThan(IDLE_TIMEOUT_MS + SLACK_MS);
  }, 10_000);

  it('sends GOAWAY to a busy connection at its maximum age, and cuts it after the grace', async () => {
    const busy = await session(port);
    // A Watch call never ends on its own: the connection is never idle.
    const watch = busy.session.request({ ':method': 'POST', ':path': '/grpc.health.v1.Health/Watch', 'content-type': 'application/grpc', te: 'trailers' });
    watch.on('error', () => {});
    watch.resume();
    watch.end(grpcFrame(Buffer.alloc(0)));
    const goawayMs = await busy.goaway;
    const closedMs = await busy.closed;
    // Spread by up to a tenth below the age, as gRPC servers do.
    expect(goawayMs).toBeGreaterThanOrEqual(MAX_AGE_MS * 0.9 - 50);
    expect(goawayMs).toBeLessThan(MAX_AGE_MS + SLACK_MS);
    expect(closedMs - goawayMs).toBeGreaterThanOrEqual(AGE_GRACE_MS - 50);
    expect(closedMs).toBeLessThan(MAX_AGE_MS + AGE_GRACE_MS + SLACK_MS);
  }, 10_000);

  it('closes connections past the cap as they are accepted, and accepts again once one is gone', async () => {
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => session(port)));
    await expect(session(port)).rejects.toThrow('closed before the server spoke');
    held[0]!.session.destroy();
    await held[0]!.closed;
    // The server sees the close a moment after the client.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await healthCheck(port)).toBe(GRPC_STATUS.OK);
    for (const { session: client } of held) client.destroy();
  }, 10_000);
});
