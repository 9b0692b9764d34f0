/**
 * envoy.service.ratelimit.v3.RateLimitService over gRPC, the protocol Envoy's ratelimit filter
 * speaks, plus the standard grpc.health.v1 health service. The .proto files are Tollgate's own
 * copies of envoy's wire format (src/service/proto, copied to dist/service/proto by the build).
 *
 * Two servers carry it, chosen by `--grpc-server`: `http2` (the default, h2-server.ts: the gRPC
 * protocol by hand on node:http2, with protobufjs codecs) and `grpc-js` (grpc-js-server.ts, on
 * @grpc/grpc-js). Both answer the same bytes (test/service/grpc/wire.test.ts compares them).
 * A request goes through the same validation as HTTP `/json` (fromEnvoyRequest), the same
 * `limiter.check()`, and answers with the same statuses and rate-limit headers; a malformed
 * request is INVALID_ARGUMENT with a message saying what to fix, a store outage is UNAVAILABLE,
 * and nothing a client sends can crash the service.
 */
import type { ServiceContext } from '../context.js';
import { startGrpcH2Server } from './h2-server.js';
import { startGrpcJsServer } from './grpc-js-server.js';
import type { GrpcServer } from './messages.js';
import type { TlsReloader } from '../http/tls.js';

export * from './messages.js';

/**
 * Starts the gRPC listener `ctx.options.grpcServer` names on `host:port` (0: a free port), over TLS
 * (mutual with --tls-client-ca, the certificate kept current) when `tls` is given; resolves once it is bound.
 */
export async function startGrpcServer(ctx: ServiceContext, host: string, port: number, tls?: TlsReloader): Promise<GrpcServer | undefined> {
  return ctx.options.grpcServer === 'grpc-js' ? startGrpcJsServer(ctx, host, port, tls) : startGrpcH2Server(ctx, host, port, tls);
}
