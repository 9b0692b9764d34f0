/**
 * A route's `waiting_room:` block: how many sessions pass at once, how long a session lasts after
 * its last request, the secret that signs the place cookies (read from the environment variable it
 * names, at load), and the waiting page's template. Every problem is reported at its line.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { YAMLMap } from 'yaml';
import { readText, readWholeNumber, reportMissing, type DocumentReader, type Entry, type FieldSet } from '../../rules/parse/fields.js';
import { readDuration } from '../config/values.js';
import { DEFAULT_TEMPLATE, TEMPLATE_FIELDS, compileTemplate, type PageTemplate } from './page.js';

/** A route's waiting room, as the configuration gives it. */
export interface WaitingRoomSettings {
  /** The room's name (`room`; default `route-<index>`): its Redis keys and its cookie's name. Two routes may share a room. */
  readonly room: string;
  /** Sessions that pass at once (`active_users`). */
  readonly activeUsers: number;
  /** A session ends this long after its last request (`session_ttl`), in ms. */
  readonly sessionTtlMs: number;
  /** The environment variable the secret came from (`secret_env`), for messages. */
  readonly secretEnv: string;
  /** The HMAC-SHA256 key of the place cookies. */
  readonly secret: Buffer;
  /** How often the waiting page asks again (`refresh`), in ms. */
  readonly refreshMs: number;
  /** A queued place not asked for this long is given up (`hold`), in ms; also how long an admitted user has to come back. */
  readonly holdMs: number;
  /** The waiting page (`template: FILE`; default: the built-in page). */
  readonly template: PageTemplate;
}

const FIELDS: FieldSet = {
  what: 'waiting_room',
  names: ['room', 'active_users', 'session_ttl', 'secret_env', 'refresh', 'hold', 'template'],
  misplaced: { secret: 'is never written in the file: put it in an environment variable and name it with secret_env' },
};
const ROOM_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The shortest secret accepted, in bytes: HMAC-SHA256 wants 32 bytes of key. */
export const MIN_SECRET_BYTES = 32;
const MAX_TEMPLATE_BYTES = 65_536;
const DAY = 86_400_000;
export const WAITING_ROOM_DEFAULTS = { refreshMs: 5_000, holdMs: 30_000 } as const;

/** Reads `waiting_room:` of the route at `routePath` (`routes[N]`); undefined when absent or broken (reported). */
export function readWaitingRoom(reader: DocumentReader, entry: Entry | undefined, routePath: string, base: string, env: NodeJS.ProcessEnv): WaitingRoomSettings | undefined {
  if (entry?.value === undefined) return undefined;
  const map = reader.mapping(entry.value, entry.path, 'a mapping like { active_users: 100, session_ttl: 5m, secret_env: TOLLGATE_WAITING_ROOM_SECRET }');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, FIELDS);
  const required: [string, string][] = [
    ['active_users', 'how many sessions pass at once, e.g. active_users: 100'],
    ['session_ttl', 'how long a session lasts after its last request, e.g. session_ttl: 5m'],
    ['secret_env', 'the environment variable holding the cookie secret, e.g. secret_env: TOLLGATE_WAITING_ROOM_SECRET'],
  ];
  for (const [name, fix] of required) if (!fields.has(name)) reportMissing(reader, map, entry.path, name, fix);
  const activeUsers = readWholeNumber(reader, fields.get('active_users'), 1, 10_000_000);
  const sessionTtlMs = bounded(reader, fields.get('session_ttl'), 1_000, DAY);
  const refreshMs = bounded(reader, fields.get('refresh'), 1_000, 600_000) ?? WAITING_ROOM_DEFAULTS.refreshMs;
  const holdMs = bounded(reader, fields.get('hold'), 2_000, DAY) ?? Math.max(WAITING_ROOM_DEFAULTS.holdMs, 3 * refreshMs);
  if (holdMs < 2 * refreshMs) reader.report(fields.get('hold')?.value ?? map, `${entry.path}.hold`, `hold (${holdMs} ms) must be at least twice refresh (${refreshMs} ms), or waiting pages lose their place between two refreshes`);
  const secretEnv = readText(reader, fields.get('secret_env'));
  const secret = secretEnv === undefined ? undefined : readSecret(reader, fields.get('secret_env')!, secretEnv, env);
  const room = readRoomName(reader, fields.get('room')) ?? `route-${/\[(\d+)\]$/.exec(routePath)?.[1] ?? '0'}`;
  const template = readTemplate(reader, fields.get('template'), base);
  if (activeUsers === undefined || sessionTtlMs === undefined || secret === undefined || template === undefined || holdMs < 2 * refreshMs) return undefined;
  return { room, activeUsers, sessionTtlMs, secretEnv: secretEnv!, secret, refreshMs, holdMs, template };
}

function bounded(reader: DocumentReader, entry: Entry | undefined, min: number, max: number): number | undefined {
  const ms = readDuration(reader, entry);
  if (ms === undefined || (ms >= min && ms <= max)) return ms;
  reader.report(entry!.value, entry!.path, `${entry!.name} must be from ${min / 1000} s to ${max >= DAY ? `${max / DAY} day` : `${max / 60_000} minutes`}, got ${ms} ms`);
  return undefined;
}

function readRoomName(reader: DocumentReader, entry: Entry | undefined): string | undefined {
  const name = readText(reader, entry);
  if (name === undefined || ROOM_NAME.test(name)) return name;
  reader.report(entry!.value, entry!.path, `room must be 1-64 letters, digits, "_" or "-", got ${JSON.stringify(name)}`);
  return undefined;
}

/** The secret from the environment: present and at least {@link MIN_SECRET_BYTES} bytes. */
function readSecret(reader: DocumentReader, entry: Entry, name: string, env: NodeJS.ProcessEnv): Buffer | undefined {
  if (!ENV_NAME.test(name)) {
    reader.report(entry.value, entry.path, `secret_env is the NAME of an environment variable (letters, digits, _), got ${JSON.stringify(name)}; never write the secret itself in the file`);
    return undefined;
  }
  const value = env[name];
  const fix = `set it to at least ${MIN_SECRET_BYTES} random bytes, e.g. export ${name}=$(openssl rand -hex 32), the same on every gateway node`;
  if (value === undefined || value === '') {
    reader.report(entry.value, entry.path, `the environment variable ${name} (secret_env) is not set: ${fix}`);
    return undefined;
  }
  const secret = Buffer.from(value, 'utf8');
  if (secret.length < MIN_SECRET_BYTES) {
    reader.report(entry.value, entry.path, `the environment variable ${name} (secret_env) holds ${secret.length} bytes, too short to sign cookies: ${fix}`);
    return undefined;
  }
  return secret;
}

/** `template: FILE` (resolved against the configuration's folder), read and checked at load. */
function readTemplate(reader: DocumentReader, entry: Entry | undefined, base: string): PageTemplate | undefined {
  const file = readText(reader, entry);
  if (file === undefined) return entry === undefined ? DEFAULT_TEMPLATE : undefined;
  let text: string;
  try {
    text = readFileSync(resolve(base, file), 'utf8');
  } catch (error) {
    reader.report(entry!.value, entry!.path, `the template ${JSON.stringify(file)} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); the path is relative to the configuration file`);
    return undefined;
  }
  if (Buffer.byteLength(text) > MAX_TEMPLATE_BYTES) {
    reader.report(entry!.value, entry!.path, `the template ${JSON.stringify(file)} is over ${MAX_TEMPLATE_BYTES} bytes; a waiting page should be small`);
    return undefined;
  }
  const compiled = compileTemplate(text);
  if (typeof compiled === 'string') {
    reader.report(entry!.value, entry!.path, `the template ${JSON.stringify(file)}: ${compiled} (the placeholders are ${TEMPLATE_FIELDS.map((name) => `{{${name}}}`).join(', ')})`);
    return undefined;
  }
  return compiled;
}

/** Two routes may share a room only with the same settings (one queue cannot have two sizes). */
export function checkSharedRooms(reader: DocumentReader, routes: readonly { route: { readonly waitingRoom?: WaitingRoomSettings }; map: YAMLMap; path: string }[]): void {
  const seen = new Map<string, { settings: WaitingRoomSettings; path: string }>();
  for (const { route, map, path } of routes) {
    const settings = route.waitingRoom;
    if (settings === undefined) continue;
    const other = seen.get(settings.room);
    if (other === undefined) seen.set(settings.room, { settings, path });
    else if (other.settings.activeUsers !== settings.activeUsers || other.settings.sessionTtlMs !== settings.sessionTtlMs || !other.settings.secret.equals(settings.secret)) {
      reader.report(map, `${path}.waiting_room.room`, `room ${JSON.stringify(settings.room)} is also the room of ${other.path} with other active_users, session_ttl or secret; give each its own room, or the same settings`);
    }
  }
}
