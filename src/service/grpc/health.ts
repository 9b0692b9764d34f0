/**
 * grpc.health.v1 for both gRPC servers: Check (SERVING when the rules are loaded and the store
 * answers, NOT_SERVING while draining, shutting down or with the breaker open; NOT_FOUND for a
 * name it does not know) and Watch streams (one readiness poll shared by all of them, a message on
 * change). The servers hand Watch streams over as a {@link HealthStream}, whatever carries them.
 */
import type { ServiceContext } from '../context.js';
import { GRPC_STATUS, RATE_LIMIT_SERVICE, type GrpcFailure } from './messages.js';

/** Service names the health service knows ("" is the whole server). */
const KNOWN_HEALTH_NAMES = new Set(['', RATE_LIMIT_SERVICE]);

/** How often Watch streams re-check readiness besides the changes the service announces (a cheap, I/O-free look). */
const HEALTH_POLL_MS = 250;

export type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

/** One Watch call as the health service sees it. */
export interface HealthStream {
  /** The service name the client asked about. */
  readonly service: string;
  /** True once the client went away. */
  readonly cancelled: boolean;
  /** Sends one HealthCheckResponse; may throw if the stream is gone. */
  write(status: ServingStatus): void;
  /** Ends the stream with status OK. */
  end(): void;
  /** Calls `listener` when the client cancels or the stream fails or closes. */
  onGone(listener: () => void): void;
}

/** grpc.health.v1 Check and Watch over the service's readiness. */
export class HealthWatchers {
  private readonly streams = new Map<HealthStream, ServingStatus | undefined>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private readonly onChange = (): void => void this.poll();

  constructor(
    private readonly ctx: ServiceContext,
    private readonly stopping: () => boolean,
  ) {
    ctx.events.on('readiness', this.onChange);
  }

  /** Check: the status of `service`, or NOT_FOUND for a name the server does not serve. */
  async check(service: string): Promise<{ status: ServingStatus } | { failure: GrpcFailure }> {
    if (!KNOWN_HEALTH_NAMES.has(service)) {
      return { failure: { code: GRPC_STATUS.NOT_FOUND, details: `unknown service ${JSON.stringify(service)}; known: "" and ${JSON.stringify(RATE_LIMIT_SERVICE)}`, metadata: {} } };
    }
    return { status: await this.status() };
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

  watch(stream: HealthStream): void {
    if (this.stopping()) {
      stream.write('NOT_SERVING');
      stream.end();
      return;
    }
    const known = KNOWN_HEALTH_NAMES.has(stream.service);
    this.streams.set(stream, undefined);
    stream.onGone(() => {
      this.streams.delete(stream);
      if (this.streams.size === 0) this.stopTimer();
    });
    if (!known) {
      // The spec: an unknown name is SERVICE_UNKNOWN, and the stream stays open.
      this.send(stream, 'SERVICE_UNKNOWN');
      return;
    }
    void this.status().then((status) => this.send(stream, status));
    this.timer ??= setInterval(() => void this.poll(), HEALTH_POLL_MS).unref();
  }

  /** Ends every stream (server shutdown). */
  close(): void {
    this.stopTimer();
    this.ctx.events.off('readiness', this.onChange);
    for (const stream of this.streams.keys()) {
      try {
        if (this.streams.get(stream) !== 'SERVICE_UNKNOWN') stream.write('NOT_SERVING');
        stream.end();
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
      for (const [stream, last] of this.streams) {
        if (last !== 'SERVICE_UNKNOWN') this.send(stream, status);
      }
    } finally {
      this.polling = false;
    }
  }

  private send(stream: HealthStream, status: ServingStatus): void {
    if (!this.streams.has(stream) || this.streams.get(stream) === status || stream.cancelled) return;
    this.streams.set(stream, status);
    try {
      stream.write(status);
    } catch {
      this.streams.delete(stream);
    }
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
