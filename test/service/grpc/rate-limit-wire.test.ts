/**
 * The hand codec of RateLimitRequest / RateLimitResponse (src/service/grpc/rate-limit-wire.ts)
 * against protobufjs, which grpc-js (proto-loader) and the codec before it use: random requests
 * with unknown fields of every wire type at every level, repeated singular fields, odd varints and
 * unit numbers decode to the same objects; garbage, mutated and truncated bytes either decode to
 * what protobufjs decodes or throw a WireError (answered INTERNAL), never anything else; random
 * responses encode to the same bytes, framed. Then random and truncated frames at a real
 * node:http2 server: each answered with a gRPC status, the server answering after them.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codec, loadProtoRoot } from '../../../src/service/grpc/codec.js';
import type { GrpcRateLimitRequest, GrpcRateLimitResponse } from '../../../src/service/grpc/messages.js';
import { GRPC_STATUS, MAX_MESSAGE_BYTES, toStruct } from '../../../src/service/grpc/messages.js';
import { WireError, decodeRateLimitRequest, responseEncoder } from '../../../src/service/grpc/rate-limit-wire.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { RawGrpcSession, SHOULD_RATE_LIMIT_PATH, grpcFrame, rateLimitRequest } from '../../support/grpc-raw.js';

const root = loadProtoRoot();
const reference = codec<GrpcRateLimitRequest, GrpcRateLimitResponse>(root, 'envoy.service.ratelimit.v3.RateLimitRequest', 'envoy.service.ratelimit.v3.RateLimitResponse');
const struct = root.lookupType('google.protobuf.Struct');
const encodeFramed = responseEncoder({
  encodeStruct: (value) => struct.encode(struct.fromObject(value as unknown as Record<string, unknown>)).finish(),
  encodeResponse: reference.encode,
});

/** protobufjs' answer for `bytes`: the object, or the error it throws. */
function protobufjs(bytes: Buffer): GrpcRateLimitRequest | Error {
  try {
    return reference.decode(bytes);
  } catch (error) {
    return error as Error;
  }
}

/** The property every input keeps: the same object as protobufjs, or a WireError (never another throw). */
function agrees(bytes: Buffer): void {
  let mine: GrpcRateLimitRequest;
  try {
    mine = decodeRateLimitRequest(bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(WireError);
    return;
  }
  expect(mine).toStrictEqual(protobufjs(bytes));
}

// --- A protobuf writer for the tests: any field, in any order, known or not. ---

const varint = (value: bigint): Buffer => {
  const out: number[] = [];
  let rest = BigInt.asUintN(64, value);
  while (rest >= 128n) {
    out.push(Number(rest & 127n) | 128);
    rest >>= 7n;
  }
  out.push(Number(rest));
  return Buffer.from(out);
};
const tag = (field: number, wire: number): Buffer => varint(BigInt((field << 3) | wire));
const delimited = (field: number, bytes: Buffer): Buffer => Buffer.concat([tag(field, 2), varint(BigInt(bytes.length)), bytes]);
const text = (field: number, value: string): Buffer => delimited(field, Buffer.from(value, 'utf8'));
const number = (field: number, value: bigint): Buffer => Buffer.concat([tag(field, 0), varint(value)]);

/** Unknown fields of every wire type (groups holding more of them), numbered past the known ones. */
const unknownField: fc.Arbitrary<Buffer> = fc.letrec<{ field: Buffer }>((tie) => ({
  field: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.tuple(fc.integer({ min: 4, max: 5000 }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })).map(([field, value]) => number(field, value)),
    fc.tuple(fc.integer({ min: 4, max: 5000 }), fc.uint8Array({ maxLength: 8 })).map(([field, bytes]) => delimited(field, Buffer.from(bytes))),
    fc.tuple(fc.integer({ min: 4, max: 5000 }), fc.uint8Array({ minLength: 8, maxLength: 8 })).map(([field, bytes]) => Buffer.concat([tag(field, 1), bytes])),
    fc.tuple(fc.integer({ min: 4, max: 5000 }), fc.uint8Array({ minLength: 4, maxLength: 4 })).map(([field, bytes]) => Buffer.concat([tag(field, 5), bytes])),
    fc.tuple(fc.integer({ min: 4, max: 5000 }), fc.array(tie('field'), { maxLength: 2 })).map(([field, inner]) => Buffer.concat([tag(field, 3), ...inner, tag(field, 4)])),
  ),
})).field;

/** A message: its known fields (any number of each, in any order) mixed with unknown ones. */
const message = (known: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> => fc.array(fc.oneof({ weight: 4, arbitrary: known }, { weight: 1, arbitrary: unknownField }), { maxLength: 6 }).map((parts) => Buffer.concat(parts));

const anyString = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 60 }), fc.string({ unit: 'binary', maxLength: 8 }));
/**
 * A uint32 field's varint: a uint32, more bits in up to five bytes, a negative int32 or another
 * 10-byte one (what encoders write; protobufjs misreads a 6- to 9-byte one, the garbage test has those).
 */
const uint32ish = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 32n - 1n }), fc.bigInt({ min: 2n ** 32n, max: 2n ** 35n - 1n }), fc.bigInt({ min: -(2n ** 31n), max: -1n }), fc.bigInt({ min: 2n ** 63n, max: 2n ** 64n - 1n }));
const entry = message(fc.oneof(fc.tuple(fc.constantFrom(1, 2), anyString).map(([field, value]) => text(field, value))));
const override = message(fc.oneof(uint32ish.map((value) => number(1, value)), fc.oneof(fc.bigInt({ min: -2n, max: 9n }), uint32ish).map((unit) => number(2, unit))));
const uint64Value = message(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((value) => number(1, value)));
const descriptor = message(fc.oneof(entry.map((bytes) => delimited(1, bytes)), override.map((bytes) => delimited(2, bytes)), uint64Value.map((bytes) => delimited(3, bytes))));
const request = message(fc.oneof(anyString.map((domain) => text(1, domain)), descriptor.map((bytes) => delimited(2, bytes)), uint32ish.map((hits) => number(3, hits))));

describe('RateLimitRequest, decoded by hand as protobufjs decodes it', () => {
  it('random requests with unknown fields of every wire type, repeated and reordered fields: the same objects', () => {
    fc.assert(
      fc.property(request, (bytes) => {
        expect(decodeRateLimitRequest(bytes)).toStrictEqual(protobufjs(bytes));
      }),
      { numRuns: 400 },
    );
  });

  it('requests protobufjs itself wrote, from objects: the same objects back', () => {
    const type = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest');
    const entries = fc.array(fc.record({ key: anyString, value: anyString }), { maxLength: 3 });
    const limit = fc.option(fc.record({ requests_per_unit: fc.nat({ max: 2 ** 32 - 1 }), unit: fc.constantFrom('SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK', 'UNKNOWN') }), { nil: undefined });
    const hits = fc.option(fc.record({ value: fc.maxSafeNat() }), { nil: undefined });
    const object = fc.record({ domain: anyString, descriptors: fc.array(fc.record({ entries, limit, hits_addend: hits }, { requiredKeys: ['entries'] }), { maxLength: 4 }), hits_addend: fc.nat({ max: 2 ** 32 - 1 }) });
    fc.assert(
      fc.property(object, (value) => {
        const bytes = Buffer.from(type.encode(type.fromObject(value)).finish());
        const decoded = decodeRateLimitRequest(bytes);
        expect(decoded).toStrictEqual(protobufjs(bytes));
        expect(decoded.domain).toBe(value.domain);
      }),
      { numRuns: 200 },
    );
  });

  it('garbage, mutated and truncated bytes: what protobufjs decodes, or a WireError', () => {
    const garbage = fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes));
    const mutated = fc.tuple(request, fc.nat(), fc.integer({ min: 0, max: 255 })).map(([bytes, at, byte]) => {
      const copy = Buffer.from(bytes);
      if (copy.length > 0) copy[at % copy.length] = byte;
      return copy;
    });
    const truncated = fc.tuple(request, fc.nat()).map(([bytes, cut]) => bytes.subarray(0, bytes.length === 0 ? 0 : cut % bytes.length));
    fc.assert(fc.property(fc.oneof(garbage, mutated, truncated), agrees), { numRuns: 1_500 });
  });

  it('pinned cases: quirks kept as protobufjs has them, stricter where it reads nonsense', () => {
    // A string length past the end: cut short, as protobufjs reads a Buffer (grpc-js then says INVALID_ARGUMENT).
    expect(decodeRateLimitRequest(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]))).toStrictEqual({ domain: '\x01', descriptors: [], hits_addend: 0 });
    // A 10-byte varint in a uint32 field: its low 32 bits.
    expect(decodeRateLimitRequest(number(3, -1n)).hits_addend).toBe(2 ** 32 - 1);
    // An embedded message past the end, wire types 4, 6 and 7, a truncated varint: errors in protobufjs' words.
    expect(() => decodeRateLimitRequest(Buffer.from([0x12, 0x10, 0x0a]))).toThrow(new WireError('index out of range: 2 + 16 > 3'));
    expect(() => decodeRateLimitRequest(Buffer.from([0x4f, 0x00]))).toThrow(/^invalid wire type 7 at offset 1$/);
    expect(() => decodeRateLimitRequest(Buffer.from([0x4c]))).toThrow(/^invalid wire type 4/);
    expect(() => decodeRateLimitRequest(Buffer.from([0x18, 0x80]))).toThrow(/^index out of range/);
    // A known field with another wire type: protobufjs reads it as its own type anyway; refused here.
    expect(() => decodeRateLimitRequest(number(1, 5n))).toThrow(new WireError('field 1 has wire type 0, not 2'));
    // Groups nested past protobufjs' depth limit.
    const deep = Buffer.concat([...Array.from({ length: 120 }, () => tag(9, 3)), ...Array.from({ length: 120 }, () => tag(9, 4))]);
    expect(() => decodeRateLimitRequest(deep)).toThrow(/^maximum nesting depth exceeded$/);
    // Unknown unit numbers stay numbers; a uint64 hits_addend past 2^53 as protobufjs rounds it.
    const bytes = delimited(2, Buffer.concat([delimited(2, number(2, 42n)), delimited(3, number(1, 2n ** 64n - 1n))]));
    expect(decodeRateLimitRequest(bytes)).toStrictEqual(protobufjs(bytes));
    expect(decodeRateLimitRequest(bytes).descriptors[0]!.limit!.unit).toBe(42);
  });
});

describe('RateLimitResponse, encoded by hand as protobufjs encodes it', () => {
  const code = fc.constantFrom<'OK' | 'OVER_LIMIT'>('OK', 'OVER_LIMIT');
  const unit = fc.constantFrom('UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK');
  const longString = fc.oneof(anyString, fc.string({ unit: 'grapheme', minLength: 40, maxLength: 200 }));
  const status = fc.record(
    {
      code,
      current_limit: fc.record({ requests_per_unit: fc.nat({ max: 2 ** 32 - 1 }), unit, name: longString }, { requiredKeys: ['requests_per_unit', 'unit'] }),
      limit_remaining: fc.nat({ max: 2 ** 32 - 1 }),
      duration_until_reset: fc.record({ seconds: fc.oneof(fc.nat({ max: 100_000 }), fc.maxSafeNat()), nanos: fc.nat({ max: 999_999_999 }) }),
    },
    { requiredKeys: ['code'] },
  );
  const json = fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 })), { maxKeys: 3 });
  const response = fc.record(
    {
      overall_code: code,
      statuses: fc.array(status, { maxLength: 5 }),
      response_headers_to_add: fc.array(fc.record({ key: longString, value: longString }), { maxLength: 6 }),
      dynamic_metadata: json.map((object) => toStruct(object)),
    },
    { requiredKeys: ['overall_code', 'statuses', 'response_headers_to_add'] },
  );

  const expected = (value: GrpcRateLimitResponse): string => Buffer.from(grpcFrame(Buffer.from(reference.encode(value)))).toString('hex');

  it('random responses (long strings, embedded messages past 127 bytes, Struct metadata): the same bytes, framed', () => {
    fc.assert(
      fc.property(response, (value) => {
        expect(encodeFramed(value).toString('hex')).toBe(expected(value));
      }),
      { numRuns: 400 },
    );
  });

  it('what it does not write itself goes to protobufjs: the same bytes again', () => {
    const odd: GrpcRateLimitResponse[] = [
      { overall_code: 'OK', statuses: [{ code: 'OK', duration_until_reset: { seconds: -5, nanos: 0 } }], response_headers_to_add: [] },
      { overall_code: 'OK', statuses: [{ code: 'OK', duration_until_reset: { seconds: 2 ** 60, nanos: 0 } }], response_headers_to_add: [] },
      { overall_code: 'OK', statuses: [{ code: 'OK', current_limit: { requests_per_unit: 1, unit: 'FORTNIGHT' } }], response_headers_to_add: [] },
      { overall_code: 'OK', statuses: [{ code: 'OK', limit_remaining: 1.5 }], response_headers_to_add: [] },
    ];
    for (const value of odd) expect(encodeFramed(value).toString('hex')).toBe(expected(value));
  });

  it('one encoder, many calls: no bytes of one answer in the next', () => {
    const big: GrpcRateLimitResponse = { overall_code: 'OVER_LIMIT', statuses: [], response_headers_to_add: [{ key: 'k', value: 'v'.repeat(10_000) }] };
    const small: GrpcRateLimitResponse = { overall_code: 'OK', statuses: [{ code: 'OK' }], response_headers_to_add: [] };
    expect(encodeFramed(big).toString('hex')).toBe(expected(big));
    expect(encodeFramed(small).toString('hex')).toBe(expected(small));
    expect(encodeFramed(small).toString('hex')).toBe('0000000006' + '0801' + '1202' + '0801');
  });
});

describe('random and broken frames at the node:http2 server', () => {
  let service: RunningService;
  let raw: RawGrpcSession;
  beforeAll(async () => {
    service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'grpc-server': 'http2' }, {}));
    raw = new RawGrpcSession(service.grpcPort!);
  });
  afterAll(async () => {
    raw.close();
    await service.close();
  });

  const good = { path: SHOULD_RATE_LIMIT_PATH, chunks: [grpcFrame(rateLimitRequest('per_ip', [{ remote_address: '198.51.100.9' }]))] };
  const header = (flag: number, length: number): Buffer => Buffer.from([flag, length >>> 24, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff]);
  const frames = fc.oneof(
    // A well-framed message of random bytes.
    fc.uint8Array({ maxLength: 64 }).map((bytes) => [grpcFrame(Buffer.from(bytes))]),
    // A mutated or truncated valid request, framed.
    fc.tuple(request, fc.nat()).map(([bytes, cut]) => [grpcFrame(bytes.subarray(0, cut % (bytes.length + 1)))]),
    // A header saying more or fewer bytes than follow, in one or two DATA frames.
    fc.tuple(fc.uint8Array({ maxLength: 32 }), fc.integer({ min: 0, max: 64 }), fc.boolean()).map(([bytes, length, split]) => {
      const whole = Buffer.concat([header(0, length), bytes]);
      return split ? [whole.subarray(0, 3), whole.subarray(3)] : [whole];
    }),
    // Random bytes, no framing at all.
    fc.uint8Array({ minLength: 1, maxLength: 32 }).map((bytes) => [Buffer.from(bytes)]),
  );
  const STATUSES: readonly number[] = Object.values(GRPC_STATUS);

  it('every one answered with a gRPC status (never a reset or a crash), the server answering after them', async () => {
    await fc.assert(
      fc.asyncProperty(frames, async (chunks) => {
        const answer = await raw.call({ path: SHOULD_RATE_LIMIT_PATH, chunks });
        expect(STATUSES).toContain(answer.status);
      }),
      { numRuns: 60 },
    );
    // An oversized length, refused from the header alone, then a good call.
    expect((await raw.call({ path: SHOULD_RATE_LIMIT_PATH, chunks: [header(0, MAX_MESSAGE_BYTES + 1)], keepOpen: true })).status).toBe(GRPC_STATUS.RESOURCE_EXHAUSTED);
    expect((await raw.call(good)).status).toBe(GRPC_STATUS.OK);
  });
});
