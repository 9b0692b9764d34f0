/**
 * Attack: skipping the waiting room's queue with an old cookie. A place is worth what the shared
 * store says, not what the cookie says: the cookie of a session that ended (replayed after its
 * session_ttl) and a ticket kept unused past `hold` (to come back later at its early number) are
 * each a newcomer's, queued behind everyone already waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClock, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { Jar, positionOf, roomConfig, roomRoute, useRoomSecret } from '../support/waiting-room.js';

const RULES = 'domain: wr\ndescriptors: []\n';

describe('waiting room: replayed and stale cookies do not skip the queue', () => {
  let redis: RedisServer;
  let upstream: Upstream;
  let gateway: TestGateway;
  const clock = new TestClock();

  beforeAll(async () => {
    useRoomSecret();
    redis = await startRedis();
    upstream = await startUpstream();
    const config = roomConfig(upstream.url, roomRoute('/', { room: 'sale', active_users: 1, session_ttl: '60s', hold: '20s', refresh: '5s' }));
    gateway = await startTestGateway(config, RULES, { clock, flags: { redis: redis.url } });
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it("a replayed cookie of an ended session is a newcomer's, behind the queue", async () => {
    const first = new Jar('first');
    const second = new Jar('second');
    const third = new Jar('third');
    expect((await first.join(gateway.url('/'))).status).toBe(200);
    const saved = first.cookies.get('tollgate_wr_sale')!;
    expect(positionOf(await second.join(gateway.url('/')))).toBe(1);
    // The first session ends (60 s after its last request); the second, polling, is admitted.
    for (let step = 0; step < 3; step++) {
      clock.now += 15_000;
      expect(positionOf(await second.get(gateway.url('/')))).toBe(1);
    }
    clock.now += 16_000;
    expect((await second.get(gateway.url('/'))).status).toBe(200);
    expect(positionOf(await third.join(gateway.url('/')))).toBe(1);
    // The first user replays its admitted cookie: a newcomer, with a new ticket.
    const replay = new Jar('replay');
    replay.cookies.set('tollgate_wr_sale', saved);
    const answer = await replay.get(gateway.url('/'));
    expect(answer.status).toBe(503);
    expect(replay.cookies.get('tollgate_wr_sale')!.split('.')[0]).not.toBe(saved.split('.')[0]);
    expect(positionOf(await replay.get(gateway.url('/')))).toBe(2);
    expect(positionOf(await third.get(gateway.url('/')))).toBe(1);
  });

  it('a ticket kept unused past hold cannot come back at its early number', async () => {
    const early = new Jar('early');
    const later = new Jar('later');
    const occupant = new Jar('occupant');
    clock.now += 600_000;
    expect((await occupant.join(gateway.url('/'))).status).toBe(200);
    // A ticket taken (first visit only), then not used.
    expect((await early.get(gateway.url('/'))).status).toBe(503);
    clock.now += 1_000;
    expect(positionOf(await later.join(gateway.url('/')))).toBe(1);
    for (let step = 0; step < 3; step++) {
      clock.now += 10_000;
      expect((await occupant.get(gateway.url('/'))).status).toBe(200);
      expect(positionOf(await later.get(gateway.url('/')))).toBe(1);
    }
    // 31 s after its ticket (hold 20 s): the early ticket is a newcomer's, behind the later one.
    expect(positionOf(await early.get(gateway.url('/')))).toBe(2);
    expect(positionOf(await early.get(gateway.url('/')))).toBe(2);
    expect(positionOf(await later.get(gateway.url('/')))).toBe(1);
  });

  it('a queued place not polled within hold is given up, and its cookie is then a newcomer', async () => {
    const occupant = new Jar('occupant2');
    const idle = new Jar('idle');
    const polling = new Jar('polling');
    clock.now += 600_000;
    expect((await occupant.join(gateway.url('/'))).status).toBe(200);
    expect(positionOf(await idle.join(gateway.url('/')))).toBe(1);
    expect(positionOf(await polling.join(gateway.url('/')))).toBe(2);
    for (let step = 0; step < 3; step++) {
      clock.now += 10_000;
      expect((await occupant.get(gateway.url('/'))).status).toBe(200);
      await polling.get(gateway.url('/'));
    }
    expect(positionOf(await polling.get(gateway.url('/')))).toBe(1);
    expect(positionOf(await idle.get(gateway.url('/')))).toBe(2);
  });
});
