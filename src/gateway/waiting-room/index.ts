/** The gateway's waiting rooms (`waiting_room:` on a route): what server.ts starts, feeds to the dashboard and closes. */
import { once } from 'node:events';
import type { Logger } from 'pino';
import type { RunningService, ServiceOptions } from '../../service/index.js';
import type { GatewayConfig } from '../config/types.js';
import { WaitingRooms, openRoomStore } from './gate.js';

export type { WaitingRoomSettings } from './config.js';
export { WaitingRooms } from './gate.js';

/** The name of the waiting rooms' part of a dashboard snapshot. */
export const DASHBOARD_PANEL = 'waitingRooms';

/** Opens the rooms' store when a configuration first has a room (at start or at a reload), and closes it. */
export class GatewayRooms {
  private rooms: WaitingRooms | undefined;

  constructor(private readonly options: ServiceOptions, private readonly service: RunningService, private readonly logger: Logger) {}

  /** The rooms, when some route of `config` has one. */
  for(config: GatewayConfig): WaitingRooms | undefined {
    if (!config.routes.some((route) => route.waitingRoom !== undefined)) return this.rooms;
    if (this.rooms !== undefined) return this.rooms;
    const { context } = this.service;
    const { store, client } = openRoomStore(this.options);
    // Without a clock of the embedder's (tests, replays), the store's time: Redis TIME on Redis.
    const clock = context.clock === Date.now ? undefined : context.clock;
    this.rooms = new WaitingRooms(store, this.service.registry, clock, this.logger, this.options.failureMode === 'closed');
    const rooms = this.rooms;
    context.panels?.set(DASHBOARD_PANEL, () => rooms.cards());
    this.ready = client === undefined ? Promise.resolve() : Promise.race([once(client, 'ready').then(() => undefined), new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref())]);
    return rooms;
  }

  /** Resolves once the store's connection is up (or after 2 s: the failure mode answers meanwhile). */
  ready: Promise<void> = Promise.resolve();

  async close(): Promise<void> {
    await this.rooms?.close();
  }
}
