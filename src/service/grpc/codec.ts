/**
 * The codecs of the node:http2 gRPC server, loaded once from the in-repo .proto files. They turn
 * bytes into objects and back exactly as @grpc/proto-loader does for grpc-js (decode + toObject
 * with LOADER_OPTIONS' conversion, fromObject + encode), so both servers see the same objects and
 * send the same bytes: protobufjs for grpc.health.v1 and google.protobuf.Struct, a hand codec
 * (rate-limit-wire.ts, tested against protobufjs) for RateLimitRequest / RateLimitResponse, the
 * messages of every call.
 */
import { accessSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_DIR, PROTO_FILES, type GrpcRateLimitRequest, type GrpcRateLimitResponse } from './messages.js';
import { decodeRateLimitRequest, responseEncoder } from './rate-limit-wire.js';

/** protobufjs' toObject options: the same conversion as LOADER_OPTIONS (numbers, enum names, defaults, []). */
const TO_OBJECT: protobuf.IConversionOptions = { longs: Number, enums: String, defaults: true, arrays: true, oneofs: true };

/** One message type's two directions. */
export interface MessageCodec<In, Out> {
  /** Bytes → object; throws on bytes that are not this message. */
  decode(bytes: Uint8Array): In;
  /** Object → bytes. */
  encode(message: Out): Uint8Array;
}

/** ShouldRateLimit's two messages: the request, and the response framed for the wire. */
export interface RateLimitCodec {
  /** Bytes → object; throws on bytes that are not this message. */
  decode(bytes: Uint8Array): GrpcRateLimitRequest;
  /** Object → a length-prefixed gRPC message. */
  encodeFramed(message: GrpcRateLimitResponse): Buffer;
}

/** The codecs the server needs. */
export interface GrpcCodecs {
  readonly rateLimit: RateLimitCodec;
  readonly health: MessageCodec<{ service: string }, { status: string }>;
}

/** Loads {@link PROTO_FILES} from {@link PROTO_DIR} (imports resolved there, google/protobuf/* from protobufjs). */
export function loadGrpcCodecs(): GrpcCodecs {
  const root = loadProtoRoot();
  const struct = root.lookupType('google.protobuf.Struct');
  const protobufRateLimit = codec<GrpcRateLimitRequest, GrpcRateLimitResponse>(root, 'envoy.service.ratelimit.v3.RateLimitRequest', 'envoy.service.ratelimit.v3.RateLimitResponse');
  return {
    rateLimit: {
      decode: decodeRateLimitRequest,
      encodeFramed: responseEncoder({
        encodeStruct: (value) => struct.encode(struct.fromObject(value as unknown as Record<string, unknown>)).finish(),
        encodeResponse: protobufRateLimit.encode,
      }),
    },
    health: codec(root, 'grpc.health.v1.HealthCheckRequest', 'grpc.health.v1.HealthCheckResponse'),
  };
}

/** The protobufjs root of {@link PROTO_FILES}, resolved. */
export function loadProtoRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    if (isAbsolute(target)) return target;
    const inRepo = join(PROTO_DIR, target);
    try {
      accessSync(inRepo);
      return inRepo;
    } catch {
      // google/protobuf/*.proto: bundled with protobufjs, found by its own name.
      return target;
    }
  };
  root.loadSync([...PROTO_FILES], { keepCase: true });
  root.resolveAll();
  return root;
}

/** protobufjs' codec of one request and one response type. */
export function codec<In, Out>(root: protobuf.Root, requestName: string, responseName: string): MessageCodec<In, Out> {
  const request = root.lookupType(requestName);
  const response = root.lookupType(responseName);
  return {
    decode: (bytes) => request.toObject(request.decode(bytes), TO_OBJECT) as In,
    encode: (message) => response.encode(response.fromObject(message as Record<string, unknown>)).finish(),
  };
}
