/**
 * `waiting_room:` in the gateway configuration: every mistake is refused at load with its line and
 * what to fix (a missing or short secret above all), and a valid block is read with its defaults.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfigError } from '../../../src/errors.js';
import { loadGatewayConfig, parseGatewayConfig } from '../../../src/gateway/config/read.js';
import { ROOM_SECRET, ROOM_SECRET_ENV, useRoomSecret } from '../../support/waiting-room.js';

const dir = mkdtempSync(join(tmpdir(), 'tollgate-wr-config-'));

function config(room: string, second = ''): string {
  return `upstreams: { app: "http://127.0.0.1:9" }
routes:
  - match: { prefix: /a }
    upstream: app
    waiting_room: ${room}
${second}`;
}

/** The problems loading `text` reports, one line each. */
function problems(text: string): string[] {
  try {
    parseGatewayConfig(text, 'gateway.yaml', dir);
  } catch (error) {
    if (error instanceof GatewayConfigError) return error.message.split('\n');
    throw error;
  }
  throw new Error('the configuration was accepted');
}

const BASE = `active_users: 10, session_ttl: 5m, secret_env: ${ROOM_SECRET_ENV}`;

describe('waiting_room configuration', () => {
  beforeAll(() => {
    useRoomSecret();
    process.env.TOLLGATE_WAITING_ROOM_SECRET = ROOM_SECRET;
    process.env.TOLLGATE_TEST_SHORT_SECRET = 'short';
    delete process.env.TOLLGATE_TEST_UNSET_SECRET;
    writeFileSync(join(dir, 'page.html'), '<p>Place {{ position }} of {{queue_length}}, {{wait}}</p>');
    writeFileSync(join(dir, 'bad.html'), '<p>{{position}} {{user_name}}</p>');
  });

  it('reads a valid block with its defaults', () => {
    const route = parseGatewayConfig(config(`{ ${BASE} }`), 'gateway.yaml', dir).routes[0]!;
    expect(route.waitingRoom).toMatchObject({ room: 'route-0', activeUsers: 10, sessionTtlMs: 300_000, secretEnv: ROOM_SECRET_ENV, refreshMs: 5_000, holdMs: 30_000 });
    expect(route.waitingRoom!.secret.toString()).toBe(ROOM_SECRET);
    const custom = parseGatewayConfig(config(`{ ${BASE}, room: launch, refresh: 10s, hold: 1m, template: page.html }`), 'gateway.yaml', dir).routes[0]!;
    expect(custom.waitingRoom).toMatchObject({ room: 'launch', refreshMs: 10_000, holdMs: 60_000 });
  });

  it('refuses a missing or short secret, naming the variable and how to make one', () => {
    expect(problems(config('{ active_users: 10, session_ttl: 5m, secret_env: TOLLGATE_TEST_UNSET_SECRET }'))).toEqual([
      'gateway.yaml:5:68: routes[0].waiting_room.secret_env: the environment variable TOLLGATE_TEST_UNSET_SECRET (secret_env) is not set: set it to at least 32 random bytes, e.g. export TOLLGATE_TEST_UNSET_SECRET=$(openssl rand -hex 32), the same on every gateway node',
    ]);
    expect(problems(config('{ active_users: 10, session_ttl: 5m, secret_env: TOLLGATE_TEST_SHORT_SECRET }'))[0]).toContain('TOLLGATE_TEST_SHORT_SECRET (secret_env) holds 5 bytes, too short to sign cookies: set it to at least 32 random bytes');
    expect(problems(config('{ active_users: 10, session_ttl: 5m, secret_env: "s3cr3t-value!" }'))[0]).toContain('secret_env is the NAME of an environment variable (letters, digits, _), got "s3cr3t-value!"; never write the secret itself in the file');
    expect(problems(config('{ active_users: 10, session_ttl: 5m, secret: abc }'))).toEqual([
      'gateway.yaml:5:19: routes[0].waiting_room.secret_env: missing secret_env: the environment variable holding the cookie secret, e.g. secret_env: TOLLGATE_WAITING_ROOM_SECRET',
      'gateway.yaml:5:56: routes[0].waiting_room.secret: "secret" is never written in the file: put it in an environment variable and name it with secret_env',
    ]);
  });

  it('refuses missing, out-of-range and misplaced fields with what to write', () => {
    expect(problems(config(`{ secret_env: ${ROOM_SECRET_ENV} }`))).toEqual([
      'gateway.yaml:5:19: routes[0].waiting_room.active_users: missing active_users: how many sessions pass at once, e.g. active_users: 100',
      'gateway.yaml:5:19: routes[0].waiting_room.session_ttl: missing session_ttl: how long a session lasts after its last request, e.g. session_ttl: 5m',
    ]);
    expect(problems(config(`{ active_users: 0, session_ttl: 300, secret_env: ${ROOM_SECRET_ENV} }`)).join('\n')).toMatch(/active_users.*0[\s\S]*session_ttl 300 has no unit: write it with one, "300s" for seconds/);
    expect(problems(config(`{ ${BASE}, refresh: 20s, hold: 30s }`))[0]).toContain('hold (30000 ms) must be at least twice refresh (20000 ms), or waiting pages lose their place between two refreshes');
    expect(problems(config(`{ ${BASE}, session_ttl: 500ms }`.replace('session_ttl: 5m, ', '')))[0]).toContain('session_ttl must be from 1 s to 1 day, got 500 ms');
    expect(problems(config(`{ ${BASE}, room: "the shop" }`))[0]).toContain('room must be 1-64 letters, digits, "_" or "-", got "the shop"');
    expect(problems(config('[10, 5m]'))[0]).toContain('routes[0].waiting_room: expected a mapping like { active_users: 100, session_ttl: 5m, secret_env: TOLLGATE_WAITING_ROOM_SECRET }');
    const misplaced = `upstreams: { app: "http://127.0.0.1:9" }
routes:
  - match: { prefix: /a }
    upstream: app
    active_users: 10
`;
    expect(problems(misplaced)[0]).toContain('routes[0].active_users: "active_users" belongs in waiting_room (waiting_room: { active_users: ... })');
  });

  it('refuses an unreadable template and one with an unknown placeholder', () => {
    expect(problems(config(`{ ${BASE}, template: missing.html }`))[0]).toContain('the template "missing.html" cannot be read (ENOENT); the path is relative to the configuration file');
    expect(problems(config(`{ ${BASE}, template: bad.html }`))[0]).toContain('the template "bad.html": unknown placeholder {{user_name}} (the placeholders are {{position}}, {{queue_length}}, {{wait}}, {{wait_seconds}}, {{refresh_seconds}}, {{room}})');
  });

  it('loads examples/gateway/waiting-room.yaml and its template', () => {
    const route = loadGatewayConfig(new URL('../../../examples/gateway/waiting-room.yaml', import.meta.url).pathname).routes[1]!;
    expect(route.waitingRoom).toMatchObject({ room: 'launch', activeUsers: 500, sessionTtlMs: 300_000, refreshMs: 10_000, holdMs: 30_000 });
  });

  it('refuses two routes sharing a room with different settings', () => {
    const second = `  - match: { prefix: /b }
    upstream: app
    waiting_room: { active_users: 20, session_ttl: 5m, secret_env: ${ROOM_SECRET_ENV}, room: shop }
`;
    expect(problems(config(`{ ${BASE}, room: shop }`, second))).toEqual([
      expect.stringContaining('routes[1].waiting_room.room: room "shop" is also the room of routes[0] with other active_users, session_ttl or secret; give each its own room, or the same settings') as unknown as string,
    ]);
  });
});
