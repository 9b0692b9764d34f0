/**
 * How many nodes share the store, for the `local` failure mode: while the store answers, this
 * limiter marks its node alive every `heartbeatMs` (a mark lasts {@link HEARTBEAT_TTL_BEATS} beats)
 * and keeps the count of nodes alive the store answers. When the store stops answering, the count
 * last seen stays, so each node enforces ⌈limit / nodes⌉ and the nodes between them about the limit.
 * `expectedNodes` is a floor: a count below it (a node that never reached the store, a peer not yet
 * seen) never raises a node's share above ⌈limit / expectedNodes⌉.
 */
import type { StoreLayer } from './store-layer.js';

/** A node is counted until it missed this many heartbeats in a row. */
export const HEARTBEAT_TTL_BEATS = 3;
/** Default time between two heartbeats, ms. */
export const DEFAULT_HEARTBEAT_MS = 2_000;

export class NodeCount {
  private seen: number | undefined;
  private beating = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly storeLayer: StoreLayer,
    private readonly heartbeatMs: number,
    private readonly expectedNodes: number,
  ) {
    void this.beat();
    this.timer = setInterval(() => void this.beat(), heartbeatMs);
    this.timer.unref();
  }

  /** The nodes to divide a limit by: the live count last seen, at least `expectedNodes`. */
  count(): number {
    return Math.max(this.expectedNodes, this.seen ?? 1);
  }

  /** The nodes the store last said were alive (this one included); undefined before the first answer. */
  lastSeen(): number | undefined {
    return this.seen;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One heartbeat at a time; one the store does not answer while its mark would last is given up on. */
  private async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    const ttlMs = this.heartbeatMs * HEARTBEAT_TTL_BEATS;
    let timer: NodeJS.Timeout | undefined;
    try {
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(resolve, ttlMs, undefined);
        timer.unref();
      });
      const answered = await Promise.race([this.storeLayer.heartbeat(ttlMs), late]);
      if (answered !== undefined) this.seen = answered;
    } catch {
      // The store is away: keep the count last seen, which is what the failure mode needs.
    } finally {
      clearTimeout(timer);
      this.beating = false;
    }
  }
}
