/**
 * Attack: skipping the waiting room's queue with an old cookie. A place is worth what the shared
 * store says, not what the cookie says: the cookie of a session that ended (replayed after its
 * session_ttl) and a ticket kept unused past `hold` (to come back later at its early number) are
 * each a newcomer's, queued behind everyone already waiting.
 */
import { describe, expect, it } from 'vitest';
import { TestClock } from '../support/gateway.js';
import { Jar, positionOf, roomRoute, useRoomGateways } from '../support/waiting-room.js';

describe('waiting room: replayed and stale cookies do not skip the queue', () => {
  const clock = new TestClock();
  const rig = useRoomGateways({ routes: [roomRoute('/', { room: 'sale', active_users: 1, session_ttl: '60s', hold: '20s', refresh: '5s' })], redis: true, clock });
  const url = (path: string) => rig.nodes[0]!.url(path);

  it("a replayed cookie of an ended session is a newcomer's, behind the queue", async () => {
    const first = new Jar('first');
    const second = new Jar('second');
    const third = new Jar('third');
    expect((await first.join(url('/'))).status).toBe(200);
    const saved = first.cookies.get('tollgate_wr_sale')!;
    expect(positionOf(await second.join(url('/')))).toBe(1);
    // The first session ends (60 s after its last request); the second, polling, is admitted.
    for (let step = 0; step < 3; step++) {
      clock.now += 15_000;
      expect(positionOf(await second.get(url('/')))).toBe(1);
    }
    clock.now += 16_000;
    expect((await second.get(url('/'))).status).toBe(200);
    expect(positionOf(await third.join(url('/')))).toBe(1);
    // The first user replays its admitted cookie: a newcomer, with a new ticket.
    const replay = new Jar('replay');
    replay.cookies.set('tollgate_wr_sale', saved);
    const answer = await replay.get(url('/'));
    expect(answer.status).toBe(503);
    expect(replay.cookies.get('tollgate_wr_sale')!.split('.')[0]).not.toBe(saved.split('.')[0]);
    expect(positionOf(await replay.get(url('/')))).toBe(2);
    expect(positionOf(await third.get(url('/')))).toBe(1);
  });

  it('a ticket kept unused past hold cannot come back at its early number', async () => {
    const early = new Jar('early');
    const later = new Jar('later');
    const occupant = new Jar('occupant');
    clock.now += 600_000;
    expect((await occupant.join(url('/'))).status).toBe(200);
    // A ticket taken (first visit only), then not used.
    expect((await early.get(url('/'))).status).toBe(503);
    clock.now += 1_000;
    expect(positionOf(await later.join(url('/')))).toBe(1);
    for (let step = 0; step < 3; step++) {
      clock.now += 10_000;
      expect((await occupant.get(url('/'))).status).toBe(200);
      expect(positionOf(await later.get(url('/')))).toBe(1);
    }
    // 31 s after its ticket (hold 20 s): the early ticket is a newcomer's, behind the later one.
    expect(positionOf(await early.get(url('/')))).toBe(2);
    expect(positionOf(await early.get(url('/')))).toBe(2);
    expect(positionOf(await later.get(url('/')))).toBe(1);
  });

  it('a queued place not polled within hold is given up, and its cookie is then a newcomer', async () => {
    const occupant = new Jar('occupant2');
    const idle = new Jar('idle');
    const polling = new Jar('polling');
    clock.now += 600_000;
    expect((await occupant.join(url('/'))).status).toBe(200);
    expect(positionOf(await idle.join(url('/')))).toBe(1);
    expect(positionOf(await polling.join(url('/')))).toBe(2);
    for (let step = 0; step < 3; step++) {
      clock.now += 10_000;
      expect((await occupant.get(url('/'))).status).toBe(200);
      await polling.get(url('/'));
    }
    expect(positionOf(await polling.get(url('/')))).toBe(1);
    expect(positionOf(await idle.get(url('/')))).toBe(2);
  });
});
