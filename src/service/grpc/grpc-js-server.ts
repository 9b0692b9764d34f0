/**
 * The gRPC listener on @grpc/grpc-js (`--grpc-server grpc-js`): envoy's RateLimitService and
 * grpc.health.v1, with grpc-js doing the protocol. The node:http2 server (h2-server.ts) is the
 * default; this one stays as the reference implementation the other is compared with, byte for byte.
 */
import type { PeerCertificate } from 'node:tls';
import { Metadata, Server, ServerCredentials, experimental, status } from '@grpc/grpc-js';
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream, ServiceDefinition, ServiceError } from '@grpc/grpc-js';
import { load } from '@grpc/proto-loader';
import type { ServiceContext } from '../context.js';
import { DEGRADED_HEADER } from '../check/decide.js';
import { HealthWatchers, type HealthStream } from './health.js';
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
} from './messages.js';
import { certificateNames, type TlsMaterial, type TlsReloader } from '../http/tls.js';

type CertificateProvider = experimental.CertificateProvider;
type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

/**
 * grpc-js's hook for certificates that change: it listens to a provider and calls the server's
 * `setSecureContext` with each update. Fed by the TLS reloader (tls.ts), so grpc-js serves the
 * same checked certificate as the other listeners, and keeps the last good one on a broken change.
 */
class ReloadedCertificates implements CertificateProvider {
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();

  constructor(private material: TlsMaterial) {}

  update(material: TlsMaterial): void {
    this.material = material;
    for (const listener of this.caListeners) this.sendCa(listener);
    for (const listener of this.identityListeners) this.sendIdentity(listener);
  }

  // The first certificates go out on the next microtask: grpc-js adds a provider's listeners before
  // its own watcher (1.14), so an answer given at once would reach no server.
  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    queueMicrotask(() => this.sendCa(listener));
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    queueMicrotask(() => this.sendIdentity(listener));
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }

  private sendCa(listener: CaListener): void {
    listener(this.material.clientCa === undefined ? null : { caCertificate: this.material.clientCa });
  }

  private sendIdentity(listener: IdentityListener): void {
    listener({ certificate: this.material.cert, privateKey: this.material.key });
  }
}

/**
 * Plain credentials, or TLS ones that follow the certificate files (mutual with --tls-client-ca).
 * grpc-js 1.14 passes `createCertificateProviderServerCredentials`'s first argument on as the
 * identity provider and its second as the CA one (its typings say the reverse): one provider
 * serves both roles here, so mutual TLS works either way; without client CAs the second is null.
 */
function credentials(tls: TlsReloader | undefined): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  const provider = new ReloadedCertificates(tls.material);
  tls.subscribe((material) => provider.update(material));
  const mutual = tls.material.clientCa !== undefined;
  return experimental.createCertificateProviderServerCredentials(provider, mutual ? provider : null, mutual);
}

/**
 * --tls-client-san on grpc-js, which gives no hook on its connections: each call checks its peer's
 * certificate and is refused UNAUTHENTICATED when the name is missing (node:http2 and HTTPS close
 * the connection instead, tls.ts's requireClientName).
 */
function refusedPeer(ctx: ServiceContext, call: { getAuthContext(): { sslPeerCertificate?: PeerCertificate } | null; getPeer(): string }): Partial<ServiceError> | undefined {
  const name = ctx.options.tls?.clientSan;
  if (name === undefined || certificateNames(call.getAuthContext()?.sslPeerCertificate, name)) return undefined;
  ctx.logger.warn({ peer: call.getPeer() }, `TLS client refused: its certificate does not name ${name} (--tls-client-san)`);
  return { code: status.UNAUTHENTICATED, details: `the client certificate does not name ${name}` };
}

/** Starts the grpc-js listener on `host:port` (0: a free port), over TLS with `tls`; resolves once it is bound. */
export async function startGrpcJsServer(ctx: ServiceContext, host: string, port: number, tls?: TlsReloader): Promise<GrpcServer> {
  const definition = await load([...PROTO_FILES], LOADER_OPTIONS);
  const limits = ctx.options.grpcConnections;
  // grpc-js keeps these limits itself; silent connections, the receive timeout and the connection
  // cap have no hook here (the node:http2 server keeps them: connection-hygiene.ts).
  const server = new Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    ...(limits.idleTimeoutMs > 0 ? { 'grpc.max_connection_idle_ms': limits.idleTimeoutMs } : {}),
    ...(limits.maxConnectionAgeMs > 0 ? { 'grpc.max_connection_age_ms': limits.maxConnectionAgeMs, 'grpc.max_connection_age_grace_ms': limits.maxConnectionAgeGraceMs } : {}),
  });
  let closing: Promise<void> | undefined;
  const health = new HealthWatchers(ctx, () => closing !== undefined);

  server.addService(definition[RATE_LIMIT_SERVICE] as unknown as ServiceDefinition, {
    ShouldRateLimit: (call: ServerUnaryCall<GrpcRateLimitRequest, GrpcRateLimitResponse>, callback: sendUnaryData<GrpcRateLimitResponse>) => {
      const refused = refusedPeer(ctx, call);
      if (refused !== undefined) callback(refused);
      else void shouldRateLimit(ctx, call, callback);
    },
  });
  server.addService(definition[HEALTH_SERVICE] as unknown as ServiceDefinition, {
    Check: (call: ServerUnaryCall<{ service: string }, { status: string }>, callback: sendUnaryData<{ status: string }>) => {
      const refused = refusedPeer(ctx, call);
      if (refused !== undefined) return callback(refused);
      void health.check(call.request.service ?? '').then((answer) => ('failure' in answer ? callback(serviceError(answer.failure)) : callback(null, answer)));
    },
    Watch: (call: ServerWritableStream<{ service: string }, { status: string }>) => {
      const refused = refusedPeer(ctx, call);
      if (refused !== undefined) call.emit('error', Object.assign(new Error(refused.details), refused));
      else health.watch(watchStream(call));
    },
  });

  const address = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
  const boundPort = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, credentials(tls), (error, bound) => {
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
