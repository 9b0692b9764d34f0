/**
 * A gRPC client for tests, built from the repository's own .proto files (the ones the service
 * serves): envoy's RateLimitService.ShouldRateLimit and grpc.health.v1 Check/Watch, plus raw calls
 * that send and receive bytes as they are on the wire (hand-encoded requests, oversized or garbage
 * messages), and a tiny protobuf reader to check field numbers independently of the .proto files.
 */
import { Client, credentials, Metadata, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { LOADER_OPTIONS, PROTO_FILES } from '../../src/service/grpc/listener.js';

export const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const HEALTH_CHECK = '/grpc.health.v1.Health/Check';
const HEALTH_WATCH = '/grpc.health.v1.Health/Watch';

/** A RateLimitRequest in proto-loader's shape (snake_case; the descriptor hits_addend is a UInt64Value). */
export interface RateLimitRequestMessage {
  domain?: string;
  descriptors?: {
    entries: { key: string; value: string }[];
    limit?: { requests_per_unit?: number; unit?: string | number };
    hits_addend?: { value: number };
  }[];
  hits_addend?: number;
}

export interface RateLimitResponseMessage {
  overall_code: 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
  statuses: {
    code: 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
    current_limit: { name: string; requests_per_unit: number; unit: string } | null;
    limit_remaining: number;
    duration_until_reset: { seconds: number; nanos: number } | null;
    quota: unknown;
  }[];
  response_headers_to_add: { key: string; value: string; raw_value: Buffer }[];
  request_headers_to_add: { key: string; value: string }[];
  raw_body: Buffer;
  dynamic_metadata: unknown;
}

interface MethodCodec {
  requestSerialize(value: unknown): Buffer;
  responseDeserialize(bytes: Buffer): unknown;
}

const definition = loadSync([...PROTO_FILES], LOADER_OPTIONS) as unknown as Record<string, Record<string, MethodCodec>>;
const rls = definition['envoy.service.ratelimit.v3.RateLimitService']!.ShouldRateLimit!;
const check = definition['grpc.health.v1.Health']!.Check!;
const watch = definition['grpc.health.v1.Health']!.Watch!;
const raw = (bytes: Buffer): Buffer => bytes;

export interface RateLimitClient {
  shouldRateLimit(request: RateLimitRequestMessage): Promise<RateLimitResponseMessage>;
  /** Sends `bytes` as the request message; resolves with the response bytes. */
  shouldRateLimitRaw(bytes: Buffer): Promise<Buffer>;
  /** grpc.health.v1 Check: the status name. */
  health(service?: string): Promise<string>;
  /** grpc.health.v1 Watch: collects statuses until cancelled or ended. */
  watchHealth(service?: string): { statuses: string[]; ended: Promise<ServiceError | undefined>; cancel(): void };
  close(): void;
}

/** A client for `127.0.0.1:port`: insecure (as Envoy talks to a sidecar) unless credentials are given (TLS). */
export function rateLimitClient(port: number, channelCredentials: ChannelCredentials = credentials.createInsecure()): RateLimitClient {
  const client = new Client(`127.0.0.1:${port}`, channelCredentials);
  const deadline = () => Date.now() + 10_000;
  const unary = <T>(path: string, serialize: (value: never) => Buffer, deserialize: (bytes: Buffer) => unknown, request: unknown): Promise<T> =>
    new Promise((resolve, reject) => {
      client.makeUnaryRequest(path, serialize as (value: unknown) => Buffer, deserialize, request, new Metadata(), { deadline: deadline() }, (error, response) => {
        if (error) reject(error);
        else resolve(response as T);
      });
    });
  return {
    shouldRateLimit: (request) => unary(SHOULD_RATE_LIMIT, rls.requestSerialize, rls.responseDeserialize, request),
    shouldRateLimitRaw: (bytes) => unary(SHOULD_RATE_LIMIT, raw, raw, bytes),
    health: async (service = '') => (await unary<{ status: string }>(HEALTH_CHECK, check.requestSerialize, check.responseDeserialize, { service })).status,
    watchHealth: (service = '') => {
      const statuses: string[] = [];
      const stream = client.makeServerStreamRequest(HEALTH_WATCH, watch.requestSerialize, watch.responseDeserialize, { service }, new Metadata(), {});
      stream.on('data', (message: { status: string }) => statuses.push(message.status));
      const ended = new Promise<ServiceError | undefined>((resolve) => {
        stream.on('error', (error: ServiceError) => resolve(error));
        stream.on('end', () => resolve(undefined));
      });
      return { statuses, ended, cancel: () => stream.cancel() };
    },
    close: () => client.close(),
  };
}

/** Resolves a gRPC call's failure (or throws if it succeeded). */
export async function grpcFailure(promise: Promise<unknown>): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error('the call succeeded; a failure was expected');
}

// ----- protobuf wire format, by hand: envoy's field numbers checked without the .proto files -----

/** One field of a message as it is on the wire. */
export type WireField = { field: number; varint: number } | { field: number; bytes: Buffer };

/** Reads a message's fields (varint and length-delimited; the only wire types these messages use). */
export function readFields(bytes: Buffer): WireField[] {
  const fields: WireField[] = [];
  let offset = 0;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = bytes[offset++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (offset < bytes.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const type = tag % 8;
    if (type === 0) fields.push({ field, varint: varint() });
    else if (type === 2) {
      const length = varint();
      fields.push({ field, bytes: bytes.subarray(offset, offset + length) });
      offset += length;
    } else throw new Error(`wire type ${type} (field ${field}) not expected here`);
  }
  return fields;
}

/** Values of `field` (varints as numbers, messages and strings as bytes). */
export function fieldValues(fields: WireField[], field: number): (number | Buffer)[] {
  return fields.filter((f) => f.field === field).map((f) => ('varint' in f ? f.varint : f.bytes));
}

/** Encodes a message from [field, value] pairs: numbers as varints, strings/Buffers length-delimited. */
export function encodeFields(pairs: [number, number | string | Buffer][]): Buffer {
  const varint = (value: number): number[] => {
    const out: number[] = [];
    while (value >= 0x80) {
      out.push((value % 128) | 0x80);
      value = Math.floor(value / 128);
    }
    out.push(value);
    return out;
  };
  const chunks: Buffer[] = [];
  for (const [field, value] of pairs) {
    if (typeof value === 'number') chunks.push(Buffer.from([...varint(field * 8), ...varint(value)]));
    else {
      const payload = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
      chunks.push(Buffer.from([...varint(field * 8 + 2), ...varint(payload.length)]), payload);
    }
  }
  return Buffer.concat(chunks);
}
