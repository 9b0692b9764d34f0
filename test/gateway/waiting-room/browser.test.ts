/**
 * The waiting room in headless Chromium, across two gateway nodes on one Redis: two users browse,
 * a third is queued (the page shows its place and refreshes itself), and when one of the two leaves
 * (its session ends session_ttl after its last request) the third's page lets it in by itself. The
 * gateway's dashboard shows the room's card. The waiting page is saved as docs/images/waiting-room.png.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS, haveChromium, launchChromium, watchProblems } from '../../support/chromium.js';
import { TestClock, type TestGateway } from '../../support/gateway.js';
import { roomRoute, useRoomGateways } from '../../support/waiting-room.js';

/** What the page functions read of the DOM (the tests compile without the DOM's types). */
declare const document: {
  title: string;
  getElementById(id: string): { textContent: string | null } | null;
  querySelector(selector: string): { getAttribute(name: string): string | null } | null;
};

const SHOP = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head><body><h1 id="shop">The shop</h1></body></html>';
const SCREENSHOT = join(process.cwd(), 'docs', 'images', 'waiting-room.png');

describe.skipIf(!haveChromium)('waiting room in headless Chromium', () => {
  const clock = new TestClock();
  const shop: Parameters<typeof useRoomGateways>[0]['handler'] = (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(SHOP);
  };
  const rig = useRoomGateways({ routes: [roomRoute('/', { room: 'launch', active_users: 2, refresh: '1s' })], nodes: 2, redis: true, clock, handler: shop });

  it('queues a third user while two browse, and lets it in when one leaves', { timeout: 90_000 }, async () => {
    const [a, b] = rig.nodes as [TestGateway, TestGateway];
    const browser = await launchChromium();
    try {
      const contexts = await Promise.all([1, 2, 3].map(() => browser.newContext({ viewport: { width: 900, height: 640 } })));
      const [first, second, third] = await Promise.all(contexts.map((context) => context.newPage()));
      const problems = [first!, second!, third!].flatMap((page) => watchProblems(page));
      // A first visit is given a ticket and comes back by itself a second later: in, while there is room.
      await first!.goto(a.url('/'));
      await first!.waitForSelector('#shop', { timeout: 10_000 });
      await second!.goto(b.url('/'));
      await second!.waitForSelector('#shop', { timeout: 10_000 });
      await third!.goto(a.url('/'));
      await third!.waitForFunction(() => document.getElementById('position')?.textContent === '1' && document.title === 'You are in the queue', undefined, { timeout: 10_000 });
      // Still queued across refreshes (its page refreshes itself every second).
      await third!.waitForTimeout(2_500);
      expect(await third!.textContent('#position')).toBe('1');
      expect(await third!.textContent('#wait')).toBe('about 1 minute');
      mkdirSync(join(process.cwd(), 'docs', 'images'), { recursive: true });
      await third!.screenshot({ path: SCREENSHOT });

      // The gateway's dashboard shows the room: one queued, two active.
      const dashboard = await contexts[0]!.newPage();
      await dashboard.goto(a.admin('/dashboard'));
      await dashboard.waitForFunction(() => document.querySelector('[data-room="launch"] [data-field="queue-length"]')?.getAttribute('data-value') === '1', undefined, { timeout: 10_000 });
      expect(await dashboard.getAttribute('[data-room="launch"] [data-field="active"]', 'data-value')).toBe('2');
      mkdirSync(ARTIFACTS, { recursive: true });
      await dashboard.screenshot({ path: join(ARTIFACTS, 'waiting-room-dashboard.png'), fullPage: true });
      await dashboard.close();

      // The second user keeps browsing; the first leaves, and its session ends 60 s after its last request.
      clock.now += 30_000;
      await second!.reload();
      await second!.waitForSelector('#shop');
      await contexts[0]!.close();
      expect(await third!.textContent('#position')).toBe('1');
      clock.now += 31_000;
      await third!.waitForSelector('#shop', { timeout: 10_000 });
      expect(await third!.title()).toBe('Shop');
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
