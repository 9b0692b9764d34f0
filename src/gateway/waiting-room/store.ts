/**
 * Where a room's queue and active sessions live: one process's memory, or Redis shared by every
 * gateway node (redis-store.ts, the same steps in one Lua script). One call per request, `visit`:
 *
 * 1. sessions whose expiry passed end; queued places not asked for within `hold` are given up;
 * 2. the visitor's place is looked up: active (its expiry moves to now + session_ttl), queued (its
 *    last poll is now), or unknown: a ticket issued within `hold` joins the queue at its ticket
 *    number (its arrival), an older or forgotten one is a newcomer's;
 * 3. while fewer than `active_users` sessions are active, the head of the queue is admitted (first
 *    in, first out), with `hold` to come back before its session starts (the visitor itself: at once);
 * 4. a newcomer is given the next ticket number, and nothing is stored for it until it comes back
 *    with its cookie: a client that drops cookies never holds a place.
 */

/** A room's bounds, as the store needs them. */
export interface RoomBounds {
  readonly room: string;
  readonly activeUsers: number;
  readonly sessionTtlMs: number;
  readonly holdMs: number;
}

/** The visitor's signed place, when its cookie verified. */
export interface VisitPlace {
  readonly ticket: number;
  readonly issued: number;
  /** Whether the cookie is a waiting one (`w`): only such a ticket, issued within `hold`, may join the queue. */
  readonly waiting: boolean;
}

/** A ticket issued this far in the future (by a node whose clock is ahead) may still join. */
export const CLOCK_SKEW_MS = 5_000;

/** Whether `place` may join the queue at `now`: a waiting ticket issued within `hold`. */
export function mayJoin(place: VisitPlace, now: number, holdMs: number): boolean {
  return place.waiting && place.issued <= now + CLOCK_SKEW_MS && now - place.issued <= holdMs;
}

/** What a visit found. */
export interface Visit {
  /** `active`: pass; `queued`: wait at `position`; `new`: a fresh `ticket`, nothing stored yet. */
  readonly state: 'active' | 'queued' | 'new';
  readonly ticket: number;
  /** Queued: 1 for the head. New: where it would join (the queue's length + 1). Active: 0. */
  readonly position: number;
  readonly queueLength: number;
  readonly activeSessions: number;
  /** Places admitted from the queue by this visit (for the admissions metric). */
  readonly promoted: number;
  /** The instant the store decided at (epoch ms): a new ticket's issue time. */
  readonly now: number;
}

export interface RoomStore {
  /** One visit; `now` undefined: the store's own time (Redis `TIME`, so every node agrees). */
  visit(bounds: RoomBounds, place: VisitPlace | undefined, now: number | undefined): Promise<Visit>;
  close(): Promise<void>;
}

/** A place's member in the store: ticket and issue time, so a ticket number reused after a reset never matches an old cookie. */
export function memberOf(ticket: number, issued: number): string {
  return `${ticket}:${issued}`;
}

/** Stale places given up per visit, at most (the rest on the next visits): a visit's work stays bounded. */
export const PRUNE_BATCH = 100;
/** Heads looked at per visit while admitting, at most. */
export const ADMIT_BATCH = 1_000;

/** One room in memory. Maps keep insertion order, and each is re-inserted when its time moves, so the oldest is first. */
class MemoryRoom {
  seq = 0;
  /** Queued members by ticket, ascending. */
  readonly queue: { ticket: number; member: string }[] = [];
  /** Queued member → last poll. */
  readonly seen = new Map<string, number>();
  /** Admitted from the queue, not yet back: member → expiry (now + hold). */
  readonly granted = new Map<string, number>();
  /** Active sessions: member → expiry (now + session_ttl). */
  readonly active = new Map<string, number>();

  get activeCount(): number {
    return this.granted.size + this.active.size;
  }

  rank(ticket: number): number {
    let low = 0;
    let high = this.queue.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (this.queue[mid]!.ticket < ticket) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  dequeue(member: string, ticket: number): void {
    const at = this.rank(ticket);
    if (this.queue[at]?.member === member) this.queue.splice(at, 1);
    this.seen.delete(member);
  }

  expire(now: number, holdMs: number): void {
    for (const map of [this.active, this.granted]) {
      for (const [member, expiry] of map) {
        if (expiry > now) break;
        map.delete(member);
      }
    }
    let pruned = 0;
    for (const [member, seen] of this.seen) {
      if (seen > now - holdMs || pruned++ >= PRUNE_BATCH) break;
      this.dequeue(member, Number(member.split(':')[0]));
    }
  }

  admit(bounds: RoomBounds, now: number): number {
    let promoted = 0;
    for (let looked = 0; this.activeCount < bounds.activeUsers && this.queue.length > 0 && looked < ADMIT_BATCH; looked++) {
      const head = this.queue[0]!;
      const seen = this.seen.get(head.member);
      this.dequeue(head.member, head.ticket);
      if (seen === undefined || seen <= now - bounds.holdMs) continue;
      this.granted.set(head.member, now + bounds.holdMs);
      promoted++;
    }
    return promoted;
  }
}

/** The memory store: one gateway node's rooms. */
export class MemoryRoomStore implements RoomStore {
  private readonly rooms = new Map<string, MemoryRoom>();

  visit(bounds: RoomBounds, place: VisitPlace | undefined, at: number | undefined): Promise<Visit> {
    const now = at ?? Date.now();
    let room = this.rooms.get(bounds.room);
    if (room === undefined) this.rooms.set(bounds.room, (room = new MemoryRoom()));
    room.expire(now, bounds.holdMs);
    const member = place === undefined ? undefined : memberOf(place.ticket, place.issued);
    let state: Visit['state'] = 'new';
    if (member !== undefined) state = this.find(room, member, place!, now, bounds.holdMs);
    const promoted = room.admit(bounds, now);
    if (member !== undefined && (state === 'active' || room.granted.has(member))) {
      room.granted.delete(member);
      room.active.delete(member);
      room.active.set(member, now + bounds.sessionTtlMs);
      state = 'active';
    }
    const queueLength = room.queue.length;
    if (state === 'new') return Promise.resolve({ state, ticket: ++room.seq, position: queueLength + 1, queueLength, activeSessions: room.activeCount, promoted, now });
    const position = state === 'queued' ? room.rank(place!.ticket) + 1 : 0;
    return Promise.resolve({ state, ticket: place!.ticket, position, queueLength, activeSessions: room.activeCount, promoted, now });
  }

  private find(room: MemoryRoom, member: string, place: VisitPlace, now: number, holdMs: number): Visit['state'] {
    if (room.active.has(member) || room.granted.has(member)) return 'active';
    if (room.seen.has(member)) {
      room.seen.delete(member);
      room.seen.set(member, now);
      return 'queued';
    }
    if (!mayJoin(place, now, holdMs) || place.ticket > room.seq) return 'new';
    room.queue.splice(room.rank(place.ticket), 0, { ticket: place.ticket, member });
    room.seen.set(member, now);
    return 'queued';
  }

  close(): Promise<void> {
    this.rooms.clear();
    return Promise.resolve();
  }
}
