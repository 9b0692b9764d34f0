/**
 * The waiting room across two gateway nodes sharing one Redis, on one controlled clock: at most
 * `active_users` sessions pass, the rest queue in order of arrival whichever node they ask, and when
 * a session ends the head of the queue is admitted, not a later place.
 */
import { describe, expect, it } from 'vitest';
import { TestClock, type TestGateway } from '../../support/gateway.js';
import { Jar, positionOf, roomRoute, useRoomGateways } from '../../support/waiting-room.js';

describe('waiting room across two gateway nodes on one Redis', () => {
  const clock = new TestClock();
  const rig = useRoomGateways({ routes: [roomRoute('/', { room: 'launch' })], nodes: 2, redis: true, clock });

  it('admits two sessions, queues the next three in order (positions 1, 2, 3), and admits the head when a session ends', async () => {
    const [a, b] = rig.nodes as [TestGateway, TestGateway];
    const users = [1, 2, 3, 4, 5].map((n) => new Jar(`user${n}`));
    const node = (n: number) => (n % 2 === 0 ? b : a);
    const answers = [];
    for (const [i, user] of users.entries()) {
      answers.push(await user.join(node(i).url('/shop')));
      clock.now += 1_000;
    }
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 503, 503, 503]);
    expect(answers.map(positionOf)).toEqual([0, 0, 1, 2, 3]);
    // Asking again, on the other node, keeps each place.
    expect(await Promise.all(users.slice(2).map((user, i) => user.get(node(i + 1).url('/shop')).then(positionOf)))).toEqual([1, 2, 3]);
    // Active users browse on either node; user 2 keeps browsing, so its session outlives user 1's.
    expect((await users[0]!.get(b.url('/shop/item'))).status).toBe(200);
    clock.now += 20_000;
    expect((await users[1]!.get(a.url('/shop/cart'))).status).toBe(200);
    // Past user 1's session_ttl (60 s after its last request), not user 2's.
    clock.now += 41_000;
    // The last place asks first: still queued, now behind one place (user 3 was admitted).
    expect(positionOf(await users[4]!.get(b.url('/shop')))).toBe(2);
    expect(positionOf(await users[3]!.get(a.url('/shop')))).toBe(1);
    const third = await users[2]!.get(b.url('/shop'));
    expect(third.status).toBe(200);
    expect(third.body).toBe('upstream GET /shop');
    // Two sessions active (users 2 and 3): user 4 still waits.
    expect(positionOf(await users[3]!.get(b.url('/shop')))).toBe(1);
    expect((await users[1]!.get(b.url('/shop'))).status).toBe(200);
  });
});
