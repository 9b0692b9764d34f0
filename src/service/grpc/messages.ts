/**
 * What both gRPC servers share (grpc-js's in grpc-js-server.ts, the node:http2 one in h2-server.ts):
 * where the .proto files are, envoy's messages in proto-loader's shape, the request → check and
 * result → response conversions, the gRPC status of an error, and one ShouldRateLimit answered
 * whatever carries it (the same validation, events, logs and degraded metadata on both).
 */
import { fileURLToPath } from 'node:url';
import type { Options } from '@grpc/proto-loader';
import { InvalidCheckError, StoreUnavailableError, TollgateError, describeValue } from '../../errors.js';
import type { CheckRequest, CheckResult, DescriptorStatus } from '../../rules/check.js';
import type { MaybePromise } from '../../store/types.js';
import type { ServiceContext } from '../context.js';
import { DEGRADED_HEADER, UNAVAILABLE_ANSWER, decideCheck, degradedAnswer } from '../check/decide.js';
import { UNIT_NAMES, dynamicMetadata, envoyResponseOptions, responseHeadersOf, fromEnvoyRequest, type EnvoyResponseOptions } from '../check/envoy.js';

/** gRPC status codes, the numbers of the gRPC spec (the same as @grpc/grpc-js's `status`). */
export const GRPC_STATUS = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;
export type GrpcStatusCode = (typeof GRPC_STATUS)[keyof typeof GRPC_STATUS];

/** A running gRPC listener, whichever server carries it. */
export interface GrpcServer {
  readonly port: number;
  /** Stops accepting, lets in-flight calls finish for up to `graceMs` (default {@link SHUTDOWN_GRACE_MS}), then cuts them. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Shuts a gRPC listener down: `graceful` stops accepting and calls back once the calls in flight
 * are done; if that takes longer than `graceMs`, `force` cuts the connections that remain.
 */
export function shutDownWithin(ctx: ServiceContext, graceMs: number, graceful: (done: () => void) => void, force: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      ctx.logger.warn({ graceMs }, 'gRPC calls still running at the shutdown deadline; closing their connections');
      force();
      resolve();
    }, graceMs);
    graceful(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Where the .proto files are (next to this module, in src/ and in dist/). */
export const PROTO_DIR = fileURLToPath(new URL('./proto/', import.meta.url));

/** The files that define the services, relative to {@link PROTO_DIR}. */
export const PROTO_FILES = ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'] as const;

/**
 * How messages are turned into objects: field names as in the .proto (snake_case), 64-bit
 * integers as numbers, enums by name, unset fields as their proto3 defaults, unset repeated
 * fields as []. Clients should load the files with the same options.
 */
export const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

/** Largest request message accepted (gRPC answers RESOURCE_EXHAUSTED above it). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

/** How long close() lets in-flight calls finish before cutting connections. */
export const SHUTDOWN_GRACE_MS = 5_000;

/** Service names the health service knows ("" is the whole server). */
export const RATE_LIMIT_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
export const HEALTH_SERVICE = 'grpc.health.v1.Health';

/** envoy.service.ratelimit.v3.RateLimitRequest as proto-loader hands it over (LOADER_OPTIONS). */
export interface GrpcRateLimitRequest {
  domain: string;
  descriptors: {
    entries: { key: string; value: string }[];
    limit: { requests_per_unit: number; unit: string | number } | null;
    hits_addend: { value: number } | null;
  }[];
  hits_addend: number;
}

/** envoy.service.ratelimit.v3.RateLimitResponse, ready for proto-loader to serialize. */
export interface GrpcRateLimitResponse {
  overall_code: 'OK' | 'OVER_LIMIT';
  statuses: GrpcDescriptorStatus[];
  response_headers_to_add: readonly { key: string; value: string }[];
  dynamic_metadata?: GrpcStruct;
}

export interface GrpcDescriptorStatus {
  code: 'OK' | 'OVER_LIMIT';
  current_limit?: { requests_per_unit: number; unit: string; name?: string };
  limit_remaining?: number;
  duration_until_reset?: { seconds: number; nanos: number };
}


const UINT32_MAX = 0xffffffff;

/**
 * A decoded RateLimitRequest → a check request. Proto3 cannot tell an unset string from an empty
 * one, so an empty domain is a missing domain. The descriptor's `hits_addend` (a UInt64Value) is
 * unwrapped to the number proto3 JSON uses (an explicit 0 stays 0: check only), and its `limit`
 * override to proto3 JSON's shape, then `/json`'s validation applies unchanged.
 */
export function fromGrpcRequest(message: GrpcRateLimitRequest): CheckRequest {
  if (typeof message.domain !== 'string' || message.domain === '') {
    throw new InvalidCheckError('domain is required: name the rules domain to check against (RateLimitRequest.domain)');
  }
  if (!Array.isArray(message.descriptors) || message.descriptors.length === 0) {
    throw new InvalidCheckError('descriptors must hold at least one RateLimitDescriptor { entries: [{ key, value }] }');
  }
  // No spreads, and the entries as decoded: fromEnvoyRequest validates and copies each one.
  const descriptors = message.descriptors.map((descriptor) => {
    const envoy: { entries: unknown; hits_addend?: number; limit?: { requests_per_unit: number; unit: string | number } } = { entries: descriptor.entries };
    if (descriptor.hits_addend !== null && descriptor.hits_addend !== undefined) envoy.hits_addend = descriptor.hits_addend.value;
    if (descriptor.limit !== null && descriptor.limit !== undefined) envoy.limit = { requests_per_unit: descriptor.limit.requests_per_unit, unit: descriptor.limit.unit };
    return envoy;
  });
  return fromEnvoyRequest(message.hits_addend ? { domain: message.domain, descriptors, hits_addend: message.hits_addend } : { domain: message.domain, descriptors });
}

/**
 * A check result → RateLimitResponse: `response_headers_to_add` and `dynamic_metadata` only when
 * the service's settings ask for them (as envoyproxy/ratelimit's), but for `tollgate-blocked`,
 * sent whenever a block refused the check (envoy/responseHeadersOf).
 */
export function toGrpcResponse(result: CheckResult, request: CheckRequest, options: EnvoyResponseOptions = {}): GrpcRateLimitResponse {
  return {
    overall_code: result.overallCode,
    statuses: result.statuses.map(grpcStatus),
    response_headers_to_add: responseHeadersOf(result, options),
    ...(options.dynamicMetadata === true ? { dynamic_metadata: toStruct(dynamicMetadata(request, result)) } : {}),
  };
}

function grpcStatus(status: DescriptorStatus): GrpcDescriptorStatus {
  // An unlimited descriptor: no limit, the largest uint32 remaining.
  if (status.currentLimit === undefined) return status.limitRemaining === 0 ? { code: status.code } : { code: status.code, limit_remaining: uint32(status.limitRemaining) };
  return {
    code: status.code,
    current_limit: {
      requests_per_unit: uint32(status.currentLimit.requestsPerUnit),
      unit: UNIT_NAMES[status.currentLimit.unit] ?? 'UNKNOWN',
      ...(status.currentLimit.name !== undefined ? { name: status.currentLimit.name } : {}),
    },
    limit_remaining: uint32(status.limitRemaining),
    // Whole seconds, rounded up, as `/json` reports it.
    duration_until_reset: { seconds: Math.max(0, Math.ceil(status.durationUntilReset / 1000)), nanos: 0 },
  };
}

/**
 * google.protobuf.Struct as proto-loader takes it: protobufjs bundles the well-known types with
 * camelCase field names, whatever `keepCase` says for our own .proto files.
 */
export type GrpcValue =
  | { nullValue: 'NULL_VALUE' }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: GrpcStruct }
  | { listValue: { values: GrpcValue[] } };
export interface GrpcStruct {
  fields: Record<string, GrpcValue>;
}

/** A JSON object as a google.protobuf.Struct. */
export function toStruct(object: Readonly<Record<string, unknown>>): GrpcStruct {
  return { fields: Object.fromEntries(Object.entries(object).map(([key, value]) => [key, toValue(value)])) };
}

function toValue(value: unknown): GrpcValue {
  if (value === null || value === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value as Record<string, unknown>) };
}

function uint32(value: number): number {
  return Math.min(UINT32_MAX, Math.max(0, Math.floor(value)));
}

/** The gRPC status of a failed call, and whether the client is at fault. */
export function grpcError(error: unknown): { code: GrpcStatusCode; details: string; invalid: boolean; storeErrorKind?: string } {
  if (error instanceof TollgateError && error.code.startsWith('ERR_TOLLGATE_INVALID')) {
    return { code: GRPC_STATUS.INVALID_ARGUMENT, details: error.message, invalid: true };
  }
  if (error instanceof StoreUnavailableError) {
    return { code: GRPC_STATUS.UNAVAILABLE, details: `store unavailable: ${error.message}`, invalid: false, storeErrorKind: error.code };
  }
  if (error instanceof TollgateError) {
    return { code: GRPC_STATUS.INTERNAL, details: error.message, invalid: false, storeErrorKind: error.code };
  }
  return { code: GRPC_STATUS.INTERNAL, details: 'internal error', invalid: false };
}

/** A call that ends in an error status: its code, its message and the metadata that goes with it. */
export interface GrpcFailure {
  readonly code: GrpcStatusCode;
  readonly details: string;
  readonly metadata: Readonly<Record<string, string>>;
}

/** How a ShouldRateLimit call ends, whichever server carries it. */
export type ShouldRateLimitAnswer = { readonly response: GrpcRateLimitResponse; readonly degraded?: string } | { readonly failure: GrpcFailure };

/**
 * One ShouldRateLimit: validation, the decision (no promise when the store answers synchronously),
 * the degraded reason (said in the response's metadata, so a degraded answer never passes for a
 * normal one), or the failure with its events and logs. Never throws.
 */
export function answerShouldRateLimit(ctx: ServiceContext, message: GrpcRateLimitRequest): MaybePromise<ShouldRateLimitAnswer> {
  try {
    const request = fromGrpcRequest(message);
    const result = decideCheck(ctx, request, 'grpc');
    if (result instanceof Promise) return settle(ctx, message, request, result);
    return answered(ctx, request, result);
  } catch (error) {
    return failed(ctx, message, error);
  }
}

async function settle(ctx: ServiceContext, message: GrpcRateLimitRequest, request: CheckRequest, pending: Promise<CheckResult>): Promise<ShouldRateLimitAnswer> {
  try {
    return answered(ctx, request, await pending);
  } catch (error) {
    return failed(ctx, message, error);
  }
}

function answered(ctx: ServiceContext, request: CheckRequest, result: CheckResult): ShouldRateLimitAnswer {
  const degraded = degradedAnswer(ctx, result.degraded);
  if (degraded?.unavailable === true) {
    return { failure: { code: GRPC_STATUS.UNAVAILABLE, details: UNAVAILABLE_ANSWER.message, metadata: { [DEGRADED_HEADER]: degraded.reason } } };
  }
  const response = toGrpcResponse(result, request, envoyResponseOptions(ctx));
  return degraded === undefined ? { response } : { response, degraded: degraded.reason };
}

function failed(ctx: ServiceContext, message: GrpcRateLimitRequest, error: unknown): ShouldRateLimitAnswer {
  const { code, details, invalid, storeErrorKind } = grpcError(error);
  try {
    if (invalid) ctx.events.emit('rejected', { via: 'grpc', reason: details });
    else if (storeErrorKind !== undefined) ctx.events.emit('storeError', { kind: storeErrorKind });
  } catch (listenerError) {
    ctx.logger.error({ err: listenerError }, 'an event listener failed');
  }
  if (!invalid) {
    if (code === GRPC_STATUS.INTERNAL) ctx.logger.error({ err: error, domain: describeValue(message?.domain) }, 'gRPC ShouldRateLimit failed');
    else ctx.logger.warn({ err: error }, 'gRPC ShouldRateLimit: store unavailable');
  }
  return { failure: { code, details, metadata: error instanceof TollgateError ? { 'tollgate-error-code': error.code } : {} } };
}
