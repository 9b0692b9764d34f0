/**
 * envoy.service.ratelimit.v3.RateLimitService over gRPC, the protocol Envoy's ratelimit filter
 * speaks, plus the standard grpc.health.v1 health service. The .proto files are Tollgate's own
 * copies of envoy's wire format (src/service/proto, copied to dist/service/proto by the build).
 *
 * A request goes through the same validation as HTTP `/json` (fromEnvoyRequest), the same
 * `limiter.check()`, and answers with the same statuses and rate-limit headers; a malformed
 * request is INVALID_ARGUMENT with a message saying what to fix, a store outage is UNAVAILABLE,
 * and nothing a client sends can crash the service.
 */
import { fileURLToPath } from 'node:url';
import { Metadata, Server, ServerCredentials, status as GrpcStatus } from '@grpc/grpc-js';
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream, ServiceDefinition, ServiceError } from '@grpc/grpc-js';
import { load, type Options } from '@grpc/proto-loader';
import { InvalidCheckError, StoreUnavailableError, TollgateError, describeValue } from '../errors.js';
import type { CheckRequest, CheckResult, DescriptorStatus } from '../rules/check.js';
import type { ServiceContext } from './context.js';
import { DEGRADED_HEADER, UNAVAILABLE_ANSWER, decideCheck, degradedAnswer } from './decide.js';
import { UNIT_NAMES, dynamicMetadata, envoyResponseOptions, responseHeadersOf, fromEnvoyRequest, type EnvoyResponseOptions } from './envoy.js';

export interface GrpcServer {
  readonly port: number;
  /** Stops accepting, lets in-flight calls finish for up to `graceMs` (default {@link SHUTDOWN_GRACE_MS}), then cuts them. */
  close(graceMs?: number): Promise<void>;
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
const HEALTH_SERVICE = 'grpc.health.v1.Health';
const KNOWN_HEALTH_NAMES = new Set(['', RATE_LIMIT_SERVICE]);

/** How often Watch streams re-check readiness besides the changes the service announces (a cheap, I/O-free look). */
const HEALTH_POLL_MS = 250;

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
  response_headers_to_add: { key: string; value: string }[];
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
  return fromEnvoyRequest({
    domain: message.domain,
    descriptors: message.descriptors.map((descriptor) => ({
      entries: descriptor.entries.map((entry) => ({ key: entry.key, value: entry.value })),
      ...(descriptor.hits_addend !== null && descriptor.hits_addend !== undefined ? { hits_addend: descriptor.hits_addend.value } : {}),
      ...(descriptor.limit !== null && descriptor.limit !== undefined ? { limit: { requests_per_unit: descriptor.limit.requests_per_unit, unit: descriptor.limit.unit } } : {}),
    })),
    ...(message.hits_addend ? { hits_addend: message.hits_addend } : {}),
  });
}

/**
 * A check result → RateLimitResponse: `response_headers_to_add` and `dynamic_metadata` only when
 * the service's settings ask for them (as envoyproxy/ratelimit's).
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
export function grpcError(error: unknown): { code: GrpcStatus; details: string; invalid: boolean; storeErrorKind?: string } {
  if (error instanceof TollgateError && error.code.startsWith('ERR_TOLLGATE_INVALID')) {
    return { code: GrpcStatus.INVALID_ARGUMENT, details: error.message, invalid: true };
  }
  if (error instanceof StoreUnavailableError) {
    return { code: GrpcStatus.UNAVAILABLE, details: `store unavailable: ${error.message}`, invalid: false, storeErrorKind: error.code };
  }
  if (error instanceof TollgateError) {
    return { code: GrpcStatus.INTERNAL, details: error.message, invalid: false, storeErrorKind: error.code };
  }
  return { code: GrpcStatus.INTERNAL, details: 'internal error', invalid: false };
}

/** Starts the gRPC listener on `host:port` (0: a free port); resolves once it is bound. */
export async function startGrpcServer(ctx: ServiceContext, host: string, port: number): Promise<GrpcServer | undefined> {
  const definition = await load([...PROTO_FILES], LOADER_OPTIONS);
  const server = new Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  });
  let closing: Promise<void> | undefined;
  const health = new HealthWatchers(ctx, () => closing !== undefined);

  server.addService(definition[RATE_LIMIT_SERVICE] as unknown as ServiceDefinition, {
    ShouldRateLimit: (call: ServerUnaryCall<GrpcRateLimitRequest, GrpcRateLimitResponse>, callback: sendUnaryData<GrpcRateLimitResponse>) => {
      void shouldRateLimit(ctx, call, callback);
    },
  });
  server.addService(definition[HEALTH_SERVICE] as unknown as ServiceDefinition, {
    Check: (call: ServerUnaryCall<{ service: string }, { status: string }>, callback: sendUnaryData<{ status: string }>) => {
      const name = call.request.service ?? '';
      if (!KNOWN_HEALTH_NAMES.has(name)) {
        callback(serviceError(GrpcStatus.NOT_FOUND, `unknown service ${JSON.stringify(name)}; known: "" and ${JSON.stringify(RATE_LIMIT_SERVICE)}`));
        return;
      }
      health.status().then(
        (status) => callback(null, { status }),
        () => callback(null, { status: 'NOT_SERVING' }),
      );
    },
    Watch: (call: ServerWritableStream<{ service: string }, { status: string }>) => health.watch(call),
  });

  const address = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
  const boundPort = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, ServerCredentials.createInsecure(), (error, bound) => {
      if (error === null) {
        resolve(bound);
        return;
      }
      server.forceShutdown();
      reject(new Error(`gRPC cannot listen on ${address}: ${error.message}`));
    });
  });

  return {
    port: boundPort,
    close: (graceMs = SHUTDOWN_GRACE_MS) => {
      closing ??= new Promise<void>((resolve) => {
        health.close();
        const force = setTimeout(() => {
          ctx.logger.warn({ graceMs }, 'gRPC calls still running at the shutdown deadline; closing their connections');
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      return closing;
    },
  };
}

async function shouldRateLimit(
  ctx: ServiceContext,
  call: ServerUnaryCall<GrpcRateLimitRequest, GrpcRateLimitResponse>,
  callback: sendUnaryData<GrpcRateLimitResponse>,
): Promise<void> {
  const message = call.request;
  try {
    const request = fromGrpcRequest(message);
    const result = await decideCheck(ctx, request, 'grpc');
    const degraded = degradedAnswer(ctx, result.degraded);
    if (degraded !== undefined) {
      // Said in the response's initial metadata, so a degraded answer never passes for a normal one.
      const metadata = new Metadata();
      metadata.set(DEGRADED_HEADER, degraded.reason);
      if (degraded.unavailable) return callback(serviceError(GrpcStatus.UNAVAILABLE, UNAVAILABLE_ANSWER.message, metadata));
      call.sendMetadata(metadata);
    }
    callback(null, toGrpcResponse(result, request, envoyResponseOptions(ctx)));
  } catch (error) {
    const { code, details, invalid, storeErrorKind } = grpcError(error);
    try {
      if (invalid) ctx.events.emit('rejected', { via: 'grpc', reason: details });
      else if (storeErrorKind !== undefined) ctx.events.emit('storeError', { kind: storeErrorKind });
    } catch (listenerError) {
      ctx.logger.error({ err: listenerError }, 'an event listener failed');
    }
    if (!invalid) {
      if (code === GrpcStatus.INTERNAL) ctx.logger.error({ err: error, domain: describeValue(message?.domain) }, 'gRPC ShouldRateLimit failed');
      else ctx.logger.warn({ err: error }, 'gRPC ShouldRateLimit: store unavailable');
    }
    const metadata = new Metadata();
    if (error instanceof TollgateError) metadata.set('tollgate-error-code', error.code);
    callback(serviceError(code, details, metadata));
  }
}

function serviceError(code: GrpcStatus, details: string, metadata?: Metadata): Partial<ServiceError> {
  return { code, details, ...(metadata !== undefined ? { metadata } : {}) };
}

type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

/** grpc.health.v1 Watch streams: one readiness poll shared by all of them, a message on change. */
class HealthWatchers {
  private readonly streams = new Map<ServerWritableStream<{ service: string }, { status: string }>, ServingStatus | undefined>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private readonly onChange = (): void => void this.poll();

  constructor(
    private readonly ctx: ServiceContext,
    private readonly stopping: () => boolean,
  ) {
    ctx.events.on('readiness', this.onChange);
  }

  /** SERVING when the rules are loaded and the store answers; NOT_SERVING while shutting down. */
  async status(): Promise<'SERVING' | 'NOT_SERVING'> {
    if (this.stopping()) return 'NOT_SERVING';
    try {
      const { ready } = await this.ctx.readiness();
      return ready && !this.stopping() ? 'SERVING' : 'NOT_SERVING';
    } catch {
      return 'NOT_SERVING';
    }
  }

  watch(call: ServerWritableStream<{ service: string }, { status: string }>): void {
    if (this.stopping()) {
      call.write({ status: 'NOT_SERVING' });
      call.end();
      return;
    }
    const known = KNOWN_HEALTH_NAMES.has(call.request.service ?? '');
    this.streams.set(call, undefined);
    const forget = (): void => {
      this.streams.delete(call);
      if (this.streams.size === 0) this.stopTimer();
    };
    call.on('cancelled', forget);
    call.on('error', forget);
    call.on('close', forget);
    if (!known) {
      // The spec: an unknown name is SERVICE_UNKNOWN, and the stream stays open.
      this.send(call, 'SERVICE_UNKNOWN');
      return;
    }
    void this.status().then((status) => this.send(call, status));
    this.timer ??= setInterval(() => void this.poll(), HEALTH_POLL_MS).unref();
  }

  /** Ends every stream (server shutdown). */
  close(): void {
    this.stopTimer();
    this.ctx.events.off('readiness', this.onChange);
    for (const call of this.streams.keys()) {
      try {
        if (this.streams.get(call) !== 'SERVICE_UNKNOWN') call.write({ status: 'NOT_SERVING' });
        call.end();
      } catch {
        // The client is already gone.
      }
    }
    this.streams.clear();
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const status = await this.status();
      for (const [call, last] of this.streams) {
        if (last !== 'SERVICE_UNKNOWN') this.send(call, status);
      }
    } finally {
      this.polling = false;
    }
  }

  private send(call: ServerWritableStream<{ service: string }, { status: string }>, status: ServingStatus): void {
    if (!this.streams.has(call) || this.streams.get(call) === status || call.cancelled) return;
    this.streams.set(call, status);
    try {
      call.write({ status });
    } catch {
      this.streams.delete(call);
    }
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
