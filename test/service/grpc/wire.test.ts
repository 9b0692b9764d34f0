/**
 * The node:http2 gRPC server (`--grpc-server http2`) against the grpc-js one, on the wire: the same
 * requests, sent as raw HTTP/2 to a service on each, give byte-identical messages and the same
 * headers, trailers and metadata, in the same order (answers, validation errors, health, unknown
 * methods, a wrong content-type, oversized and compressed messages, degraded answers). The few
 * differences on purpose (docs/service.md, "gRPC servers") are pinned down one by one. Then bad
 * input of every kind at the http2 server, each answered with its status, the server still
 * answering afterwards.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync, gzipSync } from 'node:zlib';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MESSAGE_BYTES } from '../../../src/service/grpc/listener.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { encodeFields, fieldValues, rateLimitClient, readFields } from '../../support/grpc-client.js';
import { HEALTH_CHECK_PATH, RawGrpcSession, SHOULD_RATE_LIMIT_PATH, grpcFrame, gzipFrame, rateLimitRequest, type RawRequest } from '../../support/grpc-raw.js';

/** Token buckets and GCRA only: seconds to reset do not depend on where in a second a call lands. */
const RULES = `domain: wire
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3, algorithm: token-bucket }
  - key: ip
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: gcra }
  - key: internal
    rate_limit: { unlimited: true }
  - key: trial
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1, algorithm: token-bucket }
`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-grpc-wire-'));
  writeFileSync(join(dir, 'wire.yaml'), RULES);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Both servers decide at one fixed instant: a loaded machine's calls to the two land hundreds of ms
 * apart, and a token bucket's seconds to reset then differ by one.
 */
const NOW = 1_800_000_000_000;

const start = (grpcServer: 'http2' | 'grpc-js', flags: Record<string, string> = {}): Promise<RunningService> =>
  startService(
    resolveServiceOptions(
      { port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'response-headers': 'full', 'response-dynamic-metadata': 'true', 'grpc-server': grpcServer, ...flags },
      {},
    ),
    undefined,
    { clock: () => NOW },
  );

const call = (body: Buffer, headers?: Record<string, string>): RawRequest => ({ path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(body)], ...(headers !== undefined ? { headers } : {}) });

/** Both calls land in one second (X-RateLimit-Reset is in epoch seconds). */
async function sameSecond(): Promise<void> {
  const into = Date.now() % 1_000;
  if (into > 800) await new Promise((resolve) => setTimeout(resolve, 1_000 - into + 5));
}

describe('node:http2 and grpc-js answer the same bytes', () => {
  let h2: RunningService;
  let grpcJs: RunningService;
  let toH2: RawGrpcSession;
  let toGrpcJs: RawGrpcSession;

  beforeAll(async () => {
    [h2, grpcJs] = await Promise.all([start('http2'), start('grpc-js')]);
    toH2 = new RawGrpcSession(h2.grpcPort!);
    toGrpcJs = new RawGrpcSession(grpcJs.grpcPort!);
  });
  afterAll(async () => {
    toH2.close();
    toGrpcJs.close();
    await Promise.all([h2.close(), grpcJs.close()]);
  });

  const deflated = (bytes: Buffer): Buffer => grpcFrame(deflateSync(bytes), true);
  const oversized = encodeFields([[1, 'wire'], [2, encodeFields([[1, encodeFields([[1, 'k'], [2, 'v'.repeat(MAX_MESSAGE_BYTES)]])]])]]);
  const TABLE: [string, RawRequest][] = [
    ...[1, 2, 3, 4].map((i): [string, RawRequest] => [`user u1, call ${i} (OVER_LIMIT at 4)`, call(rateLimitRequest('wire', [{ user: 'u1' }]))]),
    ['two descriptors, hits 5', call(rateLimitRequest('wire', [{ ip: '192.0.2.1' }, { user: 'u2' }], 2))],
    ['no rule matches one descriptor', call(rateLimitRequest('wire', [{ nothing: 'here' }, { ip: '192.0.2.2' }]))],
    ['unlimited', call(rateLimitRequest('wire', [{ internal: 'yes' }]))],
    ['shadow mode, twice', call(rateLimitRequest('wire', [{ trial: 't' }, { trial: 't' }]))],
    ['unknown domain', call(rateLimitRequest('elsewhere', [{ a: 'b' }]))],
    ['gzip-compressed request', { path: SHOULD_RATE_LIMIT_PATH, chunks: [gzipFrame(rateLimitRequest('wire', [{ user: 'gz' }]))], headers: { 'grpc-encoding': 'gzip' } }],
    ['deflate-compressed request', { path: SHOULD_RATE_LIMIT_PATH, chunks: [deflated(rateLimitRequest('wire', [{ user: 'gz' }]))], headers: { 'grpc-encoding': 'deflate' } }],
    ['compressed flag without grpc-encoding (read as identity)', { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(rateLimitRequest('wire', [{ user: 'id' }]), true)] }],
    ['the message split into one DATA frame per byte', { path: SHOULD_RATE_LIMIT_PATH, chunks: [...grpcFrame(rateLimitRequest('wire', [{ user: 'split' }]))].map((byte) => Buffer.from([byte])) }],
    ['no domain: INVALID_ARGUMENT', call(rateLimitRequest('', [{ user: 'x' }]))],
    ['65 descriptors: INVALID_ARGUMENT', call(rateLimitRequest('wire', Array.from({ length: 65 }, () => ({ user: 'x' }))))],
    ['an empty key: INVALID_ARGUMENT', call(rateLimitRequest('wire', [{ '': 'x' }]))],
    ['protobuf that decodes to nonsense', call(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]))],
    ['an empty message', call(Buffer.alloc(0))],
    ['over 1 MiB: RESOURCE_EXHAUSTED', call(oversized)],
    ['unknown method: UNIMPLEMENTED', { path: '/envoy.service.ratelimit.v3.RateLimitService/Nope', chunks: [grpcFrame(Buffer.alloc(0))] }],
    ['unknown service: UNIMPLEMENTED', { path: '/no.Such/Thing', chunks: [] }],
    ['content-type text/plain: HTTP 415', { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(Buffer.alloc(0))], headers: { 'content-type': 'text/plain' } }],
    ['content-type application/grpc+proto', { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(rateLimitRequest('wire', [{ user: 'proto' }]))], headers: { 'content-type': 'application/grpc+proto' } }],
    ['an invalid grpc-timeout: INTERNAL', { ...call(rateLimitRequest('wire', [{ user: 'x' }])), headers: { 'grpc-timeout': 'soon' } }],
    ['a generous grpc-timeout', { ...call(rateLimitRequest('wire', [{ user: 'deadline' }])), headers: { 'grpc-timeout': '10S' } }],
    ['health Check ""', { path: HEALTH_CHECK_PATH, chunks: [grpcFrame(Buffer.alloc(0))] }],
    ['health Check of the rate limit service', { path: HEALTH_CHECK_PATH, chunks: [grpcFrame(encodeFields([[1, 'envoy.service.ratelimit.v3.RateLimitService']]))] }],
    ['health Check of an unknown service: NOT_FOUND', { path: HEALTH_CHECK_PATH, chunks: [grpcFrame(encodeFields([[1, 'no.such.Service']]))] }],
  ];

  it.each(TABLE)('%s', async (_name, request) => {
    await sameSecond();
    const [fromH2, fromGrpcJs] = await Promise.all([toH2.call(request), toGrpcJs.call(request)]);
    expect(fromGrpcJs.headers.length).toBeGreaterThan(0);
    expect(fromH2.headers).toEqual(fromGrpcJs.headers);
    expect(fromH2.data.toString('hex')).toBe(fromGrpcJs.data.toString('hex'));
    expect(fromH2.trailers).toEqual(fromGrpcJs.trailers);
  });

  it('the table covers answers, OVER_LIMIT and errors', async () => {
    const answers = await Promise.all(TABLE.slice(0, 4).map(() => toH2.call(call(rateLimitRequest('wire', [{ user: 'coverage' }])))));
    expect(answers.map((answer) => answer.status)).toEqual([0, 0, 0, 0]);
    // RateLimitResponse.overall_code (field 1): OK = 1, OVER_LIMIT = 2; after the 5-byte frame header.
    expect(answers.map((answer) => answer.data.subarray(5, 7).toString('hex'))).toEqual(['0801', '0801', '0801', '0802']);
  });
});

describe('degraded answers, the same on both servers', () => {
  const dead = 'redis://127.0.0.1:1';
  it.each([
    ['failure mode open: OK with tollgate-degraded in the response headers', { redis: dead, 'failure-mode': 'open', 'deadline-ms': '20' }],
    ['failure mode closed, 503: UNAVAILABLE, trailers-only with tollgate-degraded', { redis: dead, 'failure-mode': 'closed', 'fail-closed-status': '503', 'deadline-ms': '20' }],
  ])('%s', async (_name, flags) => {
    const [h2, grpcJs] = await Promise.all([start('http2', flags), start('grpc-js', flags)]);
    const [toH2, toGrpcJs] = [new RawGrpcSession(h2.grpcPort!), new RawGrpcSession(grpcJs.grpcPort!)];
    try {
      const request = call(rateLimitRequest('wire', [{ user: 'down' }]));
      await sameSecond();
      const [fromH2, fromGrpcJs] = await Promise.all([toH2.call(request), toGrpcJs.call(request)]);
      const all = [...fromH2.headers, ...fromH2.trailers];
      expect(all.some(([name]) => name === 'tollgate-degraded')).toBe(true);
      expect(fromH2.headers).toEqual(fromGrpcJs.headers);
      expect(fromH2.data.toString('hex')).toBe(fromGrpcJs.data.toString('hex'));
      expect(fromH2.trailers).toEqual(fromGrpcJs.trailers);
    } finally {
      toH2.close();
      toGrpcJs.close();
      await Promise.all([h2.close(), grpcJs.close()]);
    }
  }, 20_000);
});

describe('the node:http2 server: bad input answered with its status, and the server still answers', () => {
  let service: RunningService;
  let raw: RawGrpcSession;
  const good = call(rateLimitRequest('wire', [{ ip: '198.51.100.1' }]));

  beforeAll(async () => {
    service = await start('http2');
    raw = new RawGrpcSession(service.grpcPort!);
  });
  afterAll(async () => {
    raw.close();
    await service.close();
  });

  /** After each bad request: a good call on the same connection and one through the official client. */
  async function stillAnswers(): Promise<void> {
    expect((await raw.call(good)).status).toBe(0);
    const client = rateLimitClient(service.grpcPort!);
    try {
      expect((await client.shouldRateLimit({ domain: 'wire', descriptors: [{ entries: [{ key: 'ip', value: '198.51.100.2' }] }] })).overall_code).toBe('OK');
    } finally {
      client.close();
    }
  }

  const frame = grpcFrame(rateLimitRequest('wire', [{ user: 'bad' }]));
  const bomb = gzipSync(encodeFields([[1, 'wire'], [2, Buffer.alloc(MAX_MESSAGE_BYTES + 1)]]));
  const header = (length: number): Buffer => Buffer.from([0, length >>> 24, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff]);
  it.each<[string, RawRequest, number | 'http-415', RegExp]>([
    ['wrong content-type', { path: SHOULD_RATE_LIMIT_PATH, chunks: [frame], headers: { 'content-type': 'application/json' } }, 'http-415', /^$/],
    ['a truncated frame (the stream ends inside the message)', { path: SHOULD_RATE_LIMIT_PATH, chunks: [frame.subarray(0, frame.length - 3)] }, GrpcStatus.INTERNAL, /^The request ended inside a message: got \d+ bytes of \d+ bytes \(5-byte header \+ message\); send whole length-prefixed messages$/],
    ['a truncated header', { path: SHOULD_RATE_LIMIT_PATH, chunks: [frame.subarray(0, 3)] }, GrpcStatus.INTERNAL, /^The request ended inside a message: got 3 bytes of a 5-byte message header/],
    ['a length over 1 MiB, refused from its header alone', { path: SHOULD_RATE_LIMIT_PATH, chunks: [header(MAX_MESSAGE_BYTES + 1)], keepOpen: true }, GrpcStatus.RESOURCE_EXHAUSTED, new RegExp(`^Received message larger than max \\(${MAX_MESSAGE_BYTES + 1} vs ${MAX_MESSAGE_BYTES}\\)$`)],
    ['a gzip bomb (over 1 MiB decompressed)', { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(bomb, true)], headers: { 'grpc-encoding': 'gzip' } }, GrpcStatus.RESOURCE_EXHAUSTED, /^Received message that decompresses to a size larger than 1048576$/],
    ['bytes flagged gzip that are not gzip', { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(Buffer.from('not gzip'), true)], headers: { 'grpc-encoding': 'gzip' } }, GrpcStatus.INTERNAL, /^Failed to decompress message$/],
    ['a compressed message in an encoding not accepted', { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(Buffer.from('x'), true)], headers: { 'grpc-encoding': 'br' } }, GrpcStatus.UNIMPLEMENTED, /^Received message compressed with unsupported encoding "br"; accepted: identity, deflate, gzip$/],
    ['an unknown method', { path: '/envoy.service.ratelimit.v3.RateLimitService/Other', chunks: [frame] }, GrpcStatus.UNIMPLEMENTED, /^The server does not implement the method \/envoy\.service\.ratelimit\.v3\.RateLimitService\/Other$/],
    ['invalid protobuf (a length past the end)', call(Buffer.from([0x12, 0x10, 0x0a])), GrpcStatus.INTERNAL, /^Error deserializing request: index out of range/],
    ['invalid protobuf (wire type 7 on an unknown field)', call(Buffer.from([0x4f, 0x00])), GrpcStatus.INTERNAL, /^Error deserializing request: invalid wire type 7/],
    ['no message at all', { path: SHOULD_RATE_LIMIT_PATH, chunks: [] }, GrpcStatus.UNIMPLEMENTED, /^Received no request message for unary method \/envoy/],
    ['two messages on a unary call', { path: SHOULD_RATE_LIMIT_PATH, chunks: [Buffer.concat([frame, frame])] }, GrpcStatus.UNIMPLEMENTED, /^Received a second request message for unary method \/envoy/],
    ['a grpc-timeout that passes before the request ends', { path: SHOULD_RATE_LIMIT_PATH, chunks: [frame], headers: { 'grpc-timeout': '50m' }, keepOpen: true }, GrpcStatus.DEADLINE_EXCEEDED, /^Deadline exceeded$/],
    ['a malformed grpc-timeout', { path: SHOULD_RATE_LIMIT_PATH, chunks: [frame], headers: { 'grpc-timeout': '123456789S' } }, GrpcStatus.INTERNAL, /^Invalid grpc-timeout value "123456789S"$/],
  ])('%s', async (_name, request, expected, message) => {
    const answer = await raw.call(request);
    if (expected === 'http-415') {
      expect(answer.headers).toEqual([[':status', '415']]);
    } else {
      expect(answer.status).toBe(expected);
      expect(answer.message).toMatch(message);
      expect(answer.data.length).toBe(0);
      // Trailers-only: the status is in the response headers, with HTTP 200.
      expect(answer.headers[0]).toEqual([':status', '200']);
    }
    await stillAnswers();
  });

  it('several calls interleaved on one connection, each split across DATA frames, get their own answers', async () => {
    const users = Array.from({ length: 20 }, (_, i) => `inter-${i}`);
    const answers = await Promise.all(
      users.map((user) => {
        const bytes = grpcFrame(rateLimitRequest('wire', [{ user }], 2));
        return raw.call({ path: SHOULD_RATE_LIMIT_PATH, chunks: [bytes.subarray(0, 3), bytes.subarray(3, 9), bytes.subarray(9)] });
      }),
    );
    // 3 per minute, 2 hits: each user has exactly 1 left, so every answer is its own.
    for (const answer of answers) {
      expect(answer.status).toBe(0);
      const [status] = fieldValues(readFields(answer.data.subarray(5)), 2) as Buffer[];
      expect(fieldValues(readFields(status!), 3)).toEqual([1]); // DescriptorStatus.limit_remaining
    }
  });

  it('a client that resets its stream mid-request, garbage instead of HTTP/2, and HTTP/1.1: the connection ends, the server stays up', async () => {
    // On a connection of its own: Node 20's http2 *client* aborts (an assertion in
    // Http2Session::CheckAllocatedSize) when a stream is reset right after a write on a session
    // that already carried several streams. The server is not concerned.
    const resetter = new RawGrpcSession(service.grpcPort!);
    const stream = resetter.session.request({ ':method': 'POST', ':path': SHOULD_RATE_LIMIT_PATH, 'content-type': 'application/grpc' });
    stream.on('error', () => {});
    stream.write(frame.subarray(0, 4));
    stream.close();
    await new Promise((resolve) => stream.on('close', resolve));
    resetter.close();

    for (const bytes of [Buffer.from('\x00\x01garbage garbage garbage\r\n\r\n'), Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff')]) {
      await new Promise<void>((resolve) => {
        const socket = connectTcp(service.grpcPort!, '127.0.0.1', () => socket.end(bytes));
        socket.on('data', () => {});
        socket.on('error', () => resolve());
        socket.on('close', () => resolve());
      });
    }
    await stillAnswers();
  });
});
