/**
 * Attack: a bot that drops cookies floods a route behind a waiting room, to get through or to fill
 * the queue or the active sessions. A request without a valid cookie is given a ticket and the
 * page, and nothing is stored for it until it comes back with that cookie: the bot only ever sees
 * the page, the queue does not grow, and a real user's place does not move.
 */
import { describe, expect, it } from 'vitest';
import { TestClock, send } from '../support/gateway.js';
import { Jar, roomRoute, useRoomGateways } from '../support/waiting-room.js';

describe('waiting room: a cookieless bot flood', () => {
  const rig = useRoomGateways({ routes: [roomRoute('/', { room: 'flood', active_users: 2 })], redis: true, clock: new TestClock() });

  it('never passes, never holds a place, and leaves the queue as it was', async () => {
    const [gateway, upstream, redis] = [rig.nodes[0]!, rig.upstream, rig.redis!];
    // With room to spare, a cookieless request still gets the page (not a session).
    const first = await send(gateway.url('/'), { headers: { accept: 'application/json' } });
    expect(first.status).toBe(503);
    expect(JSON.parse(first.body)).toMatchObject({ position: 1, queueLength: 1, retryAfter: 1 });
    const users = [new Jar('u1'), new Jar('u2'), new Jar('u3')];
    for (const user of users) await user.join(gateway.url('/'));
    const before = JSON.parse((await users[2]!.get(gateway.url('/'))).body) as { position: number; queueLength: number };
    expect(before).toMatchObject({ position: 1, queueLength: 1 });
    const answers = await Promise.all(Array.from({ length: 200 }, () => send(gateway.url('/'), { headers: { accept: 'text/html' } })));
    expect(new Set(answers.map((answer) => answer.status))).toEqual(new Set([503]));
    expect(upstream.requests.length).toBe(2);
    const after = JSON.parse((await users[2]!.get(gateway.url('/'))).body) as { position: number; queueLength: number };
    expect(after).toMatchObject({ position: 1, queueLength: 1 });
    // Only the room's four keys, whatever the flood: no key per request.
    expect(redis.cli('--scan', '--pattern', 'tollgate:wr:*').trim().split('\n').sort()).toEqual(['tollgate:wr:{flood}:active', 'tollgate:wr:{flood}:queue', 'tollgate:wr:{flood}:seen', 'tollgate:wr:{flood}:seq']);
    expect(Number(redis.cli('ZCARD', 'tollgate:wr:{flood}:queue').trim())).toBe(1);
  });
});
