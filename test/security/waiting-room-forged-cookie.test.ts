/**
 * Attack: forging a waiting-room place cookie to get in without waiting. The cookie is signed
 * (HMAC-SHA256 with the room's secret over the room's name and the place), so a changed signature, a
 * ticket number changed to an admitted user's, a cookie signed with another key, and a cookie of
 * another room are each refused: the client is a newcomer (a fresh ticket and the waiting page),
 * and nothing of it reaches the upstream.
 */
import { createHmac } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { TestClock } from '../support/gateway.js';
import { Jar, positionOf, roomRoute, useRoomGateways } from '../support/waiting-room.js';

describe('waiting room: forged place cookies', () => {
  const occupant = new Jar('occupant');
  const attacker = new Jar('attacker');
  const rig = useRoomGateways({ routes: [roomRoute('/alpha', { room: 'alpha', active_users: 1 }), roomRoute('/beta', { room: 'beta', active_users: 1 })], clock: new TestClock() });
  const gateway = { url: (path: string) => rig.nodes[0]!.url(path) };

  beforeAll(async () => {
    expect((await occupant.join(gateway.url('/alpha'))).status).toBe(200);
    expect(positionOf(await attacker.join(gateway.url('/alpha')))).toBe(1);
  });

  const alphaRequests = () => rig.upstream.requests.filter((request) => request.url.startsWith('/alpha')).length;

  /** Sends `value` as the alpha room's cookie; expects the answer of a newcomer (a new ticket, the page). */
  async function refused(value: string): Promise<void> {
    const before = alphaRequests();
    const forger = new Jar('forger');
    forger.cookies.set('tollgate_wr_alpha', value);
    const answer = await forger.get(gateway.url('/alpha'));
    expect(answer.status).toBe(503);
    const fresh = forger.cookies.get('tollgate_wr_alpha')!;
    expect(fresh).not.toBe(value);
    expect(fresh.split('.')[0]).not.toBe(value.split('.')[0]);
    // Back with the fresh ticket it is behind the attacker's honest place, not ahead of it.
    expect(positionOf(await forger.get(gateway.url('/alpha')))).toBeGreaterThan(1);
    expect(alphaRequests()).toBe(before);
  }

  it('a cookie whose signature was changed is refused', async () => {
    const value = attacker.cookies.get('tollgate_wr_alpha')!;
    const last = value.at(-1) === 'A' ? 'B' : 'A';
    await refused(value.slice(0, -1) + last);
  });

  it("a cookie whose ticket number was changed to the admitted user's is refused", async () => {
    const [, issued, kind, mac] = attacker.cookies.get('tollgate_wr_alpha')!.split('.');
    const [ticket] = occupant.cookies.get('tollgate_wr_alpha')!.split('.');
    await refused([ticket, issued, kind, mac].join('.'));
    // The admitted user's own place, marked admitted, but signed with a guessed key.
    const [, occupantIssued] = occupant.cookies.get('tollgate_wr_alpha')!.split('.');
    const guessed = createHmac('sha256', 'guessed-secret-guessed-secret-guessed').update(`tollgate-waiting-room:v1|alpha|${ticket}|${occupantIssued}|a`).digest('base64url');
    await refused(`${ticket}.${occupantIssued}.a.${guessed}`);
  });

  it("another room's cookie is refused, under either room's name", async () => {
    const other = new Jar('other-room');
    expect((await other.join(gateway.url('/beta'))).status).toBe(200);
    const beta = other.cookies.get('tollgate_wr_beta')!;
    await refused(beta);
    // Sent as it is (its own name) to the alpha room: not alpha's place, so a newcomer there.
    const before = alphaRequests();
    expect((await other.get(gateway.url('/alpha'))).status).toBe(503);
    expect(alphaRequests()).toBe(before);
  });

  it('malformed cookies are refused without harm', async () => {
    for (const value of ['', 'garbage', '1.2.a', '99999999999999999999.1.a.x', `1.1.z.${'A'.repeat(43)}`]) await refused(value);
  });
});
