/**
 * The gRPC listener on @grpc/grpc-js (`--grpc-server grpc-js`): envoy's RateLimitService and
 * grpc.health.v1, with grpc-js doing the protocol. The node:http2 server (grpc-h2.ts) is the
 * default; this one stays as the reference implementation the other is compared with, byte for byte.
 */
import { Metadata, Server, ServerCredentials } from '@grpc/grpc-js';
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream, ServiceDefinition, ServiceError } from '@grpc/grpc-js';
import { load } from '@grpc/proto-loader';
import type { ServiceContext } from './context.js';
import { DEGRADED_HEADER } from './decide.js';
import { HealthWatchers, type HealthStream } from './grpc-health.js';
import {
  HEALTH_SERVICE,
  LOADER_OPTIONS,
  MAX_MESSAGE_BYTES,
  PROTO_FILES,
  RATE_LIMIT_SERVICE,
  SHUTDOWN_GRACE_MS,
  answerShouldRateLimit,
  shutDownWithin,
  type GrpcFailure,
  type GrpcRateLimitRequest,
  type GrpcRateLimitResponse,
  type GrpcServer,
} from './grpc-messages.js';

/** Starts the grpc-js listener on `host:port` (0: a free port); resolves once it is bound. */
export async function startGrpcJsServer(ctx: ServiceContext, host: string, port: number): Promise<GrpcServer> {
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
      void health.check(call.request.service ?? '').then((answer) => ('failure' in answer ? callback(serviceError(answer.failure)) : callback(null, answer)));
    },
    Watch: (call: ServerWritableStream<{ service: string }, { status: string }>) => health.watch(watchStream(call)),
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
      if (closing === undefined) health.close();
      closing ??= shutDownWithin(ctx, graceMs, (done) => server.tryShutdown(() => done()), () => server.forceShutdown());
      return closing;
    },
  };
}

async function shouldRateLimit(
  ctx: ServiceContext,
  call: ServerUnaryCall<GrpcRateLimitRequest, GrpcRateLimitResponse>,
  callback: sendUnaryData<GrpcRateLimitResponse>,
): Promise<void> {
  const answer = await answerShouldRateLimit(ctx, call.request);
  if ('failure' in answer) {
    callback(serviceError(answer.failure));
    return;
  }
  if (answer.degraded !== undefined) {
    const metadata = new Metadata();
    metadata.set(DEGRADED_HEADER, answer.degraded);
    call.sendMetadata(metadata);
  }
  callback(null, answer.response);
}

function serviceError(failure: GrpcFailure): Partial<ServiceError> {
  const metadata = new Metadata();
  for (const [key, value] of Object.entries(failure.metadata)) metadata.set(key, value);
  return { code: failure.code, details: failure.details, metadata };
}

/** A grpc-js Watch call as the health service sees it. */
function watchStream(call: ServerWritableStream<{ service: string }, { status: string }>): HealthStream {
  return {
    service: call.request.service ?? '',
    get cancelled() {
      return call.cancelled;
    },
    write: (status) => void call.write({ status }),
    end: () => call.end(),
    onGone: (listener) => {
      call.on('cancelled', listener);
      call.on('error', listener);
      call.on('close', listener);
    },
  };
}
