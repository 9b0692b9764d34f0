/**
 * The waiting rooms' metrics on the service's registry (GET /metrics on the admin port) and their
 * dashboard cards. Labelled by room: names come from the configuration, never from a request, so
 * the series are bounded. Queue length and active sessions are as this node last saw them (the
 * store's figures, shared by every node on one Redis); admissions and waits are counted by the node
 * that saw them, so sum them over nodes.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Visit } from './store.js';

/** Seconds of admissions kept per room for the dashboard's rate. */
const RATE_SECONDS = 10;

/** One room as the dashboard shows it. */
export interface RoomCard {
  readonly room: string;
  readonly activeUsers: number;
  readonly queueLength: number;
  readonly activeSessions: number;
  /** Admissions per second over the last {@link RATE_SECONDS} whole seconds (this node's). */
  readonly admittedPerSecond: number;
  /** The last wait measured at admission, in seconds (null: none yet). */
  readonly lastWaitSeconds: number | null;
  readonly waitingPages: number;
}

interface RoomTally {
  activeUsers: number;
  queueLength: number;
  activeSessions: number;
  lastWaitSeconds: number | null;
  waitingPages: number;
  /** Admissions per whole second (epoch s → count), the last {@link RATE_SECONDS}. */
  readonly admitted: Map<number, number>;
}

export class RoomMetrics {
  private readonly queueLength: Gauge<'room'>;
  private readonly active: Gauge<'room'>;
  private readonly admitted: Counter<'room'>;
  private readonly pages: Counter<'room'>;
  private readonly waits: Histogram<'room'>;
  private readonly tallies = new Map<string, RoomTally>();

  constructor(registry: Registry, private readonly clock: () => number) {
    const registers = [registry];
    this.queueLength = new Gauge({ name: 'tollgate_waiting_room_queue_length', help: 'Places queued in a waiting room, as this node last saw them (shared by every node on one Redis)', labelNames: ['room'], registers });
    this.active = new Gauge({ name: 'tollgate_waiting_room_active_sessions', help: 'Active sessions of a waiting room (at most its active_users), as this node last saw them', labelNames: ['room'], registers });
    this.admitted = new Counter({ name: 'tollgate_waiting_room_admitted_total', help: 'Places admitted from a waiting room queue into a session, by this node (rate() is admissions per second)', labelNames: ['room'], registers });
    this.pages = new Counter({ name: 'tollgate_waiting_room_pages_total', help: 'Waiting pages (HTML or JSON, status 503) this node answered', labelNames: ['room'], registers });
    this.waits = new Histogram({
      name: 'tollgate_waiting_room_wait_seconds',
      help: 'Time from a ticket being issued to its first admitted request, in seconds',
      labelNames: ['room'],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1_800, 3_600, 7_200],
      registers,
    });
  }

  private tally(room: string, activeUsers: number): RoomTally {
    let tally = this.tallies.get(room);
    if (tally === undefined) this.tallies.set(room, (tally = { activeUsers, queueLength: 0, activeSessions: 0, lastWaitSeconds: null, waitingPages: 0, admitted: new Map() }));
    tally.activeUsers = activeUsers;
    return tally;
  }

  /** A visit's figures. */
  visited(room: string, activeUsers: number, visit: Visit): void {
    const tally = this.tally(room, activeUsers);
    tally.queueLength = visit.queueLength;
    tally.activeSessions = visit.activeSessions;
    this.queueLength.set({ room }, visit.queueLength);
    this.active.set({ room }, visit.activeSessions);
    if (visit.promoted === 0) return;
    this.admitted.inc({ room }, visit.promoted);
    const second = Math.floor(this.clock() / 1000);
    tally.admitted.set(second, (tally.admitted.get(second) ?? 0) + visit.promoted);
    for (const at of tally.admitted.keys()) if (at <= second - RATE_SECONDS) tally.admitted.delete(at);
  }

  /** A place's first admitted request, `waitMs` after its ticket was issued. */
  waited(room: string, activeUsers: number, waitMs: number): void {
    const seconds = Math.max(0, waitMs) / 1000;
    this.waits.observe({ room }, seconds);
    this.tally(room, activeUsers).lastWaitSeconds = seconds;
  }

  paged(room: string, activeUsers: number): void {
    this.pages.inc({ room });
    this.tally(room, activeUsers).waitingPages++;
  }

  /** The dashboard's cards, one per room seen. */
  cards(): RoomCard[] {
    const now = Math.floor(this.clock() / 1000);
    return [...this.tallies].map(([room, tally]) => {
      let admitted = 0;
      for (const [at, count] of tally.admitted) if (at < now && at >= now - RATE_SECONDS) admitted += count;
      const { activeUsers, queueLength, activeSessions, lastWaitSeconds, waitingPages } = tally;
      return { room, activeUsers, queueLength, activeSessions, admittedPerSecond: admitted / RATE_SECONDS, lastWaitSeconds, waitingPages };
    });
  }
}
