/**
 * What a connection to the node:http2 gRPC listener may hold, and for how long (docs/operations.md,
 * "gRPC connections"). Without these, silent TCP connections were kept for good and a few
 * connections of half-sent calls held memory without bound. The rules: a connection that sends no
 * byte within the headers timeout is closed (as on the HTTP listener); one with no call open for
 * the idle timeout, or older than the max age, is sent GOAWAY (calls in flight finish) and, for the
 * age, cut after its grace; at most N connections and M calls per connection. The per-call receive
 * timeout is kept by the call itself (h2-server.ts), which answers it.
 */
import type { Http2SecureServer, Http2Server, ServerHttp2Session } from 'node:http2';
import { closeSilentConnections } from '../http/close.js';
import type { GrpcConnectionLimits } from './connection-options.js';

/** The HTTP/2 settings that carry the limits to clients. */
export function hygieneSettings(limits: GrpcConnectionLimits): { maxConcurrentStreams: number } {
  return { maxConcurrentStreams: limits.maxConcurrentStreams };
}

/**
 * Applies the connection rules to `server` (before it listens): silent connections closed after
 * `silentMs` (the headers timeout), the connection cap, and each session's idle and age timers.
 */
export function keepConnectionsClean(server: Http2Server | Http2SecureServer, limits: GrpcConnectionLimits, silentMs: number): void {
  closeSilentConnections(server, silentMs);
  // net closes a connection past this as it is accepted, before TLS or HTTP/2 costs anything.
  server.maxConnections = limits.maxConnections;
  server.on('session', (session) => watchSession(session, limits));
}

/** The idle and age timers of one session, all dropped when it closes. */
function watchSession(session: ServerHttp2Session, limits: GrpcConnectionLimits): void {
  let age: NodeJS.Timeout | undefined;
  let idle: NodeJS.Timeout | undefined;
  session.once('close', () => {
    clearTimeout(age);
    clearTimeout(idle);
  });
  if (limits.maxConnectionAgeMs > 0) {
    age = unrefTimer(jittered(limits.maxConnectionAgeMs), () => {
      // GOAWAY: calls in flight finish; the client opens a new connection for its next call (and may land elsewhere).
      if (!session.closed) session.close();
      age = unrefTimer(limits.maxConnectionAgeGraceMs, () => session.destroy());
    });
  }
  if (limits.idleTimeoutMs === 0) return;
  const goIdle = (): NodeJS.Timeout => unrefTimer(limits.idleTimeoutMs, () => session.close());
  let open = 0;
  idle = goIdle();
  session.on('stream', (stream) => {
    open += 1;
    clearTimeout(idle);
    // 'close' comes once: on(), not once() and its wrapper.
    stream.on('close', () => {
      open -= 1;
      if (open === 0 && !session.closed) idle = goIdle();
    });
  });
}

/** A timer that does not keep the process alive. */
function unrefTimer(ms: number, run: () => void): NodeJS.Timeout {
  const timer = setTimeout(run, ms);
  timer.unref();
  return timer;
}

/** `ms` less up to a tenth, as gRPC servers spread MAX_CONNECTION_AGE, so connections made together are not all closed together. */
function jittered(ms: number): number {
  return Math.max(1, Math.round(ms * (0.9 + Math.random() * 0.1)));
}
