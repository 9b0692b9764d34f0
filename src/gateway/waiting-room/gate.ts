/**
 * The waiting room in front of a route: each request's place cookie is verified, the room's store
 * is visited once, and the request either goes on (an active session: to the route's rate limits,
 * then the upstream) or is answered the waiting page. A client without a valid cookie is given a
 * ticket and the page, never a session: a session starts only when a client comes back with its
 * cookie, so clients that drop cookies only ever see the page and hold no place.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { HeaderList } from '../../http/report.js';
import { UNAVAILABLE_BODY } from '../../http/report.js';
import { openClient } from '../../store/redis/connect.js';
import type { ServiceOptions } from '../../service/index.js';
import { sendText } from '../reply.js';
import type { WaitingRoomSettings } from './config.js';
import { cookieName, cookieValues, setCookie, signPlace, verifyPlace, type Place } from './cookie.js';
import { RoomMetrics, type RoomCard } from './metrics.js';
import { sendWaiting } from './page.js';
import { RedisRoomStore } from './redis-store.js';
import { MemoryRoomStore, type RoomStore, type Visit } from './store.js';

/** How long the browser keeps a place cookie: the store, not the cookie, says whether the place still counts. */
const COOKIE_MAX_AGE_MS = 86_400_000;
/** A newcomer with room to enter asks again this soon. */
const ENTER_SOON_MS = 1_000;
const COMMAND_TIMEOUT_MS = 1_000;
/** How often a failing store is logged. */
const FAILURE_LOG_MS = 10_000;
const CONNECT_TIMEOUT_MS = 5_000;

/** What the handler does with a request the room let through: go on, with these response headers. */
export type Proceed = (headers: HeaderList) => void;

/** The waiting rooms of one gateway process (one store for all its rooms). */
export class WaitingRooms {
  readonly metrics: RoomMetrics;
  private failures = 0;
  private lastFailureLog = 0;

  /**
   * `clock`: the gateway's decisions clock, given to the store (tests, replays); undefined: the
   * store's own time (Redis `TIME`), so nodes with skewed clocks agree on when a session ends.
   */
  constructor(private readonly places: RoomStore, registry: Registry, private readonly clock: (() => number) | undefined, private readonly logger: Logger, private readonly failClosed: boolean) {
    this.metrics = new RoomMetrics(registry, clock ?? Date.now);
  }

  /** Lets the request on (`proceed`) or answers it; never throws. */
  gate(room: WaitingRoomSettings, req: IncomingMessage, res: ServerResponse, proceed: Proceed): void {
    const place = this.placeOf(room, req.headers.cookie);
    this.places.visit(room, place === undefined ? undefined : { ticket: place.ticket, issued: place.issued, waiting: place.kind === 'w' }, this.clock?.()).then(
      (visit) => this.answer(room, req, res, proceed, place, visit),
      (error: unknown) => this.failed(room, res, proceed, error),
    );
  }

  /** The first cookie value this room signed, if any. */
  private placeOf(room: WaitingRoomSettings, header: string | undefined): Place | undefined {
    for (const value of cookieValues(header, cookieName(room.room))) {
      const place = verifyPlace(room.secret, room.room, value);
      if (place !== undefined) return place;
    }
    return undefined;
  }

  private answer(room: WaitingRoomSettings, req: IncomingMessage, res: ServerResponse, proceed: Proceed, place: Place | undefined, visit: Visit): void {
    const { now } = visit;
    this.metrics.visited(room.room, room.activeUsers, visit);
    const secure = (req.socket as TLSSocket).encrypted === true;
    const cookie = (next: Place): [string, string] => ['set-cookie', setCookie(cookieName(room.room), signPlace(room.secret, room.room, next), COOKIE_MAX_AGE_MS, secure)];
    if (visit.state === 'active') {
      if (place!.kind === 'a') return proceed([]);
      this.metrics.waited(room.room, room.activeUsers, now - place!.issued);
      return proceed([cookie({ ...place!, kind: 'a' })]);
    }
    this.metrics.paged(room.room, room.activeUsers);
    const fresh = visit.state === 'new';
    const headers: HeaderList = fresh ? [cookie({ ticket: visit.ticket, issued: now, kind: 'w' })] : [];
    const enterSoon = fresh && visit.queueLength === 0 && visit.activeSessions < room.activeUsers;
    const view = {
      room: room.room,
      position: visit.position,
      queueLength: Math.max(visit.queueLength, visit.position),
      waitMs: enterSoon ? 0 : estimatedWait(room, visit.position),
      refreshMs: enterSoon ? ENTER_SOON_MS : room.refreshMs,
    };
    sendWaiting(res, req.method ?? 'GET', req.headers.accept, room.template, view, headers);
  }

  /** The store did not answer: the service's failure mode decides (closed: 503; open, local: the room is skipped). */
  private failed(room: WaitingRoomSettings, res: ServerResponse, proceed: Proceed, error: unknown): void {
    // One line per FAILURE_LOG_MS, with the count since the last: an outage must not flood the log.
    this.failures++;
    if (Date.now() - this.lastFailureLog >= FAILURE_LOG_MS) {
      this.lastFailureLog = Date.now();
      const what = this.failClosed ? 'answering 503 (failure mode closed)' : 'letting requests through (failure mode open)';
      this.logger.warn({ err: (error as Error).message, room: room.room, failures: this.failures }, `waiting room store failed: ${what}`);
      this.failures = 0;
    }
    if (this.failClosed) sendText(res, 503, 'application/json; charset=utf-8', UNAVAILABLE_BODY, [['retry-after', '1'], ['cache-control', 'no-store']]);
    else proceed([]);
  }

  cards(): RoomCard[] {
    return this.metrics.cards();
  }

  close(): Promise<void> {
    return this.places.close();
  }
}

/**
 * The estimated wait of position `position`: the sessions ahead of it must end, `active_users` at a
 * time, each within one `session_ttl` of its last request (an upper estimate when users leave, a
 * lower one when they keep browsing).
 */
export function estimatedWait(room: WaitingRoomSettings, position: number): number {
  return Math.ceil(position / room.activeUsers) * room.sessionTtlMs;
}

/** The rooms' store: Redis when the gateway has one (shared by every node), else this process's memory. */
export function openRoomStore(options: ServiceOptions): { store: RoomStore; client?: Redis | Cluster } {
  const { redis: url, redisCluster: cluster, redisSentinel: sentinel } = options;
  if (url === undefined && cluster === undefined && sentinel === undefined) return { store: new MemoryRoomStore() };
  const where = url !== undefined ? { url } : cluster !== undefined ? { cluster } : { sentinels: sentinel!.nodes, name: sentinel!.name };
  const { client } = openClient(where, { commandTimeout: COMMAND_TIMEOUT_MS, connectTimeout: CONNECT_TIMEOUT_MS });
  // Errors reach the requests (the failure mode answers them); the connection retries by itself.
  client.on('error', () => undefined);
  return { store: new RedisRoomStore(client), client };
}
