/**
 * Waiting-room tests' helpers: a client that keeps its cookies (a jar per user), the gateway
 * configuration of one room, and the secret every node reads from the environment.
 */
import { afterAll, beforeAll } from 'vitest';
import { send, startTestGateway, startUpstream, type Answer, type TestClock, type TestGateway, type Upstream } from './gateway.js';
import { startRedis, type RedisServer } from './redis.js';

/** The environment variable the test rooms name in `secret_env`, and its value (set by {@link useRoomSecret}). */
export const ROOM_SECRET_ENV = 'TOLLGATE_TEST_WAITING_ROOM_SECRET';
export const ROOM_SECRET = 'a-test-secret-of-more-than-32-bytes-0123456789';

/** Sets the rooms' secret in this process's environment (the configuration loader reads it there). */
export function useRoomSecret(): void {
  process.env[ROOM_SECRET_ENV] = ROOM_SECRET;
}

/** A route behind a waiting room: `fields` over the defaults (2 users, 60 s sessions, held 10 minutes). */
export function roomRoute(prefix: string, fields: Record<string, string | number> = {}): string {
  const all = { active_users: 2, session_ttl: '60s', secret_env: ROOM_SECRET_ENV, hold: '10m', ...fields };
  return `  - match: { prefix: ${prefix} }
    upstream: app
    waiting_room: { ${Object.entries(all).map(([name, value]) => `${name}: ${value}`).join(', ')} }
`;
}

/** A gateway configuration with these routes (from {@link roomRoute}) to one upstream. */
export function roomConfig(upstream: string, ...routes: string[]): string {
  return `upstreams: { app: "${upstream}" }\nroutes:\n${routes.join('')}`;
}

/** One user: a cookie jar over any number of gateway nodes. */
export class Jar {
  readonly cookies = new Map<string, string>();

  constructor(readonly name: string) {}

  header(): string | undefined {
    return this.cookies.size === 0 ? undefined : [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /** GET `url` with the jar's cookies (JSON asked for unless `html`), keeping what the answer sets. */
  async get(url: string, options: { html?: boolean } = {}): Promise<Answer> {
    const cookie = this.header();
    const headers: Record<string, string> = { accept: options.html === true ? 'text/html' : 'application/json', ...(cookie !== undefined ? { cookie } : {}) };
    const answer = await send(url, { headers });
    for (const line of answer.headers['set-cookie'] ?? []) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      this.cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    return answer;
  }

  /** The first visit (a ticket) then the second (the place taken): the answer to the second. */
  async join(url: string): Promise<Answer> {
    await this.get(url);
    return this.get(url);
  }
}

/** The queue position a JSON waiting answer gives, or 0 when the request passed. */
export function positionOf(answer: Answer): number {
  if (answer.status !== 503) return 0;
  return (JSON.parse(answer.body) as { position: number }).position;
}

/** The gateways of a waiting-room test, their upstream and (on Redis) the Redis they share. */
export interface RoomRig {
  readonly nodes: readonly TestGateway[];
  readonly upstream: Upstream;
  /** With `redis: true`. */
  readonly redis: RedisServer | undefined;
}

/** Rules with nothing to limit: the waiting-room routes need none. */
const NO_RULES = 'domain: wr\ndescriptors: []\n';

/**
 * Starts, before the file's tests, an upstream (`handler`, default: `upstream <method> <url>`), a
 * Redis of its own when `redis`, and `nodes` gateways (default 1) with `routes` (from
 * {@link roomRoute}) on `clock`; stops them all after.
 */
export function useRoomGateways(options: { routes: readonly string[]; nodes?: number; redis?: boolean; clock?: TestClock; rules?: string; handler?: Parameters<typeof startUpstream>[0] }): RoomRig {
  const rig: { nodes: TestGateway[]; upstream?: Upstream; redis?: RedisServer } = { nodes: [] };
  beforeAll(async () => {
    useRoomSecret();
    if (options.redis === true) rig.redis = await startRedis();
    rig.upstream = await startUpstream(options.handler);
    const config = roomConfig(rig.upstream.url, ...options.routes);
    const flags: Record<string, string> = rig.redis === undefined ? {} : { redis: rig.redis.url };
    for (let i = 0; i < (options.nodes ?? 1); i++) rig.nodes.push(await startTestGateway(config, options.rules ?? NO_RULES, { flags, ...(options.clock !== undefined ? { clock: options.clock } : {}) }));
  }, 30_000);
  afterAll(async () => {
    for (const node of rig.nodes) await node.close();
    await rig.upstream?.close();
    await rig.redis?.stop();
  });
  return {
    get nodes() {
      return rig.nodes;
    },
    get upstream() {
      return rig.upstream!;
    },
    get redis() {
      return rig.redis;
    },
  };
}
