/**
 * The service's view of its Redis connection: whether it answers now (readiness), what happens each
 * time it comes up (the decision script is loaded, pushed rules start syncing), and the start with
 * Redis down (a warning, then everything follows the connection when it comes up). ioredis
 * reconnects by itself; while it waits between attempts, a plain TCP probe of a single node every
 * {@link PROBE_INTERVAL_MS} lets it reconnect as soon as Redis listens instead of at its next
 * backoff step.
 */
import { connect } from 'node:net';
import type { Logger } from 'pino';
import type { StoredSync } from '../../rules/shared/stored-sync.js';
import type { RedisStore } from '../../store/redis/store.js';
import type { ReadinessCheck } from './readiness.js';

/** How often an unreachable single Redis is probed for a listening port. */
export const PROBE_INTERVAL_MS = 100;

/** Longest wait between attempts to start the pushed-rules sync while Redis answers. */
const SYNC_RETRY_MAX_MS = 30_000;

export interface StoreLinkOptions {
  readonly logger: Logger;
  /** Called whenever the connection comes up or goes down (readiness changed). */
  readonly onChange: () => void;
  /** `host:port` of a single Redis to probe while it is unreachable (not for Cluster or Sentinel). */
  readonly probe?: { readonly host: string; readonly port: number } | undefined;
}

/** Follows a Redis store's connection. */
export class StoreLink {
  private lastError: Error | undefined;
  private wasReachable = false;
  /** Whether the start's outcome was told: later changes are logged from then on. */
  private announced = false;
  /** Connected since the last lost connection was logged (one line per outage). */
  private upSinceLoss = false;
  private scriptLoad: Promise<void> = Promise.resolve();
  private probeTimer: NodeJS.Timeout | undefined;
  private readonly connectedListeners: (() => void)[] = [];
  private closed = false;

  constructor(
    private readonly store: RedisStore,
    private readonly options: StoreLinkOptions,
  ) {
    const client = store.client;
    client.on('error', (error: Error) => (this.lastError = error));
    client.on('ready', () => this.onReady());
    for (const event of ['close', 'end', 'reconnecting']) client.on(event, () => this.onDown(event === 'reconnecting'));
  }

  /** Whether Redis answers now. */
  get reachable(): boolean {
    return this.store.client.status === 'ready';
  }

  /** Runs `listener` each time the connection comes up (after the script load was sent). */
  onConnected(listener: () => void): void {
    this.connectedListeners.push(listener);
  }

  /**
   * Waits for the first connection's outcome: up (the script loaded), or refused / failed / not up
   * within the store's connect timeout, logged once as a warning. Never rejects.
   */
  async start(timeoutMs: number): Promise<boolean> {
    if (!this.reachable) await this.firstOutcome(timeoutMs);
    if (this.reachable) {
      this.announced = true;
      await this.scriptLoad;
      return true;
    }
    this.options.logger.warn(
      { store: 'redis', address: this.store.address, err: this.lastError },
      'store unreachable at start; serving by the failure modes until it answers',
    );
    this.announced = true;
    this.startProbing();
    return false;
  }

  check(): ReadinessCheck {
    return {
      name: 'store',
      check: () => {
        const reachable = this.reachable;
        const details: Record<string, unknown> = { store: 'redis', storeReachable: reachable };
        if (!reachable) {
          details.storeStatus = this.store.client.status;
          if (this.lastError !== undefined) details.storeError = this.lastError.message;
        }
        return { ready: reachable, details };
      },
    };
  }

  close(): void {
    this.closed = true;
    this.stopProbing();
  }

  private firstOutcome(timeoutMs: number): Promise<void> {
    const client = this.store.client;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        for (const event of ['ready', 'error', 'close', 'end']) client.off(event, done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      for (const event of ['ready', 'error', 'close', 'end']) client.once(event, done);
    });
  }

  private onReady(): void {
    this.lastError = undefined;
    this.upSinceLoss = true;
    this.stopProbing();
    // ready() on a connected client only loads the script (a later NOSCRIPT falls back to EVAL).
    this.scriptLoad = this.store.ready().catch(() => undefined);
    this.changed(true);
    for (const listener of this.connectedListeners) listener();
  }

  /** `lost`: the client reconnects (an outage), not a close of ours. */
  private onDown(lost: boolean): void {
    if (lost && this.upSinceLoss && !this.closed) {
      this.upSinceLoss = false;
      this.options.logger.warn({ store: 'redis', address: this.store.address }, 'store connection lost; serving by the failure modes until it answers');
    }
    this.changed(false);
    if (!this.closed && this.store.client.status === 'reconnecting') this.startProbing();
  }

  private changed(reachable: boolean): void {
    if (reachable === this.wasReachable) return;
    this.wasReachable = reachable;
    // Each change is one line: an operator who read "unreachable" also reads when it came back.
    if (reachable && this.announced) this.options.logger.info({ store: 'redis', address: this.store.address }, 'store reachable again; deciding on the shared store');
    this.options.onChange();
  }

  /** While ioredis waits out its backoff, reconnect as soon as the port accepts a connection. */
  private startProbing(): void {
    const probe = this.options.probe;
    if (probe === undefined || this.probeTimer !== undefined || this.closed) return;
    let probing = false;
    this.probeTimer = setInterval(() => {
      if (probing) return;
      probing = true;
      const socket = connect({ host: probe.host, port: probe.port });
      socket.setTimeout(PROBE_INTERVAL_MS * 5);
      const finish = (listening: boolean): void => {
        socket.destroy();
        probing = false;
        const client = this.store.client;
        // connect() is refused unless the client is between attempts: never a second connection.
        if (listening && client.status === 'reconnecting' && !this.closed) client.connect().catch(() => undefined);
      };
      socket.once('connect', () => finish(true));
      socket.once('error', () => finish(false));
      socket.once('timeout', () => finish(false));
    }, PROBE_INTERVAL_MS);
    this.probeTimer.unref();
  }

  private stopProbing(): void {
    if (this.probeTimer !== undefined) clearInterval(this.probeTimer);
    this.probeTimer = undefined;
  }
}

/** `redis://host:port` → what to probe. */
export function probeAddress(url: string): { host: string; port: number } | undefined {
  try {
    const parsed = new URL(url);
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    return { host: host === '' ? '127.0.0.1' : host, port: parsed.port === '' ? 6379 : Number(parsed.port) };
  } catch {
    return undefined;
  }
}

/**
 * Starts the pushed-rules sync each time Redis comes up until it has started once; a start that
 * fails (Redis went away meanwhile) is retried with a growing delay while Redis answers, and said
 * once, not at every attempt.
 */
export class RulesSyncStarter {
  private started = false;
  private starting: Promise<void> | undefined;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly sync: StoredSync,
    private readonly link: StoreLink,
    private readonly logger: Logger,
    /** Names the sync in logs. */
    private readonly what = 'pushed rules',
  ) {
    link.onConnected(() => void this.kick());
  }

  /** Starts the sync if Redis answers and it has not started; resolves when this attempt ends. */
  kick(): Promise<void> {
    if (this.started || this.closed || !this.link.reachable) return Promise.resolve();
    this.starting ??= this.attempt().finally(() => (this.starting = undefined));
    return this.starting;
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
  }

  private async attempt(): Promise<void> {
    try {
      await this.sync.start();
      if (this.closed) return;
      this.started = true;
      if (this.failures > 0) this.logger.info({ attempts: this.failures + 1 }, `${this.what} sync started`);
    } catch (error) {
      await this.sync.close();
      this.failures += 1;
      if (this.failures === 1) this.logger.warn({ err: error }, `${this.what} sync could not start; retrying while Redis answers`);
      const delay = Math.min(1_000 * 2 ** (this.failures - 1), SYNC_RETRY_MAX_MS);
      this.retryTimer = setTimeout(() => void this.kick(), delay);
      this.retryTimer.unref();
    }
  }
}
