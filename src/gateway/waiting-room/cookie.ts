/**
 * The place cookie: `<ticket>.<issued>.<kind>.<mac>`, where `mac` is HMAC-SHA256 (key: the room's
 * secret) of the room's name and the three fields. The cookie names a place; the store says what the
 * place is worth (queued, active, or nothing any more), so a cookie can be neither forged (no secret),
 * moved to another room (the room is signed), nor replayed once its place is gone (the store has
 * forgotten the ticket).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** `w`: issued or queued (its wait is measured when it is admitted); `a`: admitted. */
export type PlaceKind = 'w' | 'a';

/** What a valid cookie says. */
export interface Place {
  /** The ticket number: the order of arrival in the room. */
  readonly ticket: number;
  /** When the ticket was issued (epoch ms): with the ticket, the member the store keeps. */
  readonly issued: number;
  readonly kind: PlaceKind;
}

const COOKIE = /^(\d{1,15})\.(\d{1,15})\.([wa])\.([A-Za-z0-9_-]{43})$/;
const MAX_COOKIE_HEADER = 8_192;

/** The cookie's name for `room`. */
export function cookieName(room: string): string {
  return `tollgate_wr_${room}`;
}

function mac(secret: Buffer, room: string, ticket: number, issued: number, kind: PlaceKind): string {
  return createHmac('sha256', secret).update(`tollgate-waiting-room:v1|${room}|${ticket}|${issued}|${kind}`).digest('base64url');
}

/** The signed cookie value of `place` in `room`. */
export function signPlace(secret: Buffer, room: string, place: Place): string {
  return `${place.ticket}.${place.issued}.${place.kind}.${mac(secret, room, place.ticket, place.issued, place.kind)}`;
}

/** The place a cookie value names, or undefined when it is malformed or its signature is not this room's. */
export function verifyPlace(secret: Buffer, room: string, value: string): Place | undefined {
  const match = COOKIE.exec(value);
  if (match === null) return undefined;
  const ticket = Number(match[1]);
  const issued = Number(match[2]);
  const kind = match[3] as PlaceKind;
  const expected = Buffer.from(mac(secret, room, ticket, issued, kind));
  const given = Buffer.from(match[4]!);
  return expected.length === given.length && timingSafeEqual(expected, given) ? { ticket, issued, kind } : undefined;
}

/** The values of cookie `name` in a Cookie header (several when a client sends duplicates; all are tried). */
export function cookieValues(header: string | undefined, name: string): string[] {
  if (header === undefined || header.length > MAX_COOKIE_HEADER) return [];
  const values: string[] = [];
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === name) values.push(pair.slice(at + 1).trim());
  }
  return values;
}

/** The Set-Cookie header value: HttpOnly, SameSite=Lax, Secure over TLS, kept `maxAgeMs`. */
export function setCookie(name: string, value: string, maxAgeMs: number, secure: boolean): string {
  return `${name}=${value}; Path=/; Max-Age=${Math.ceil(maxAgeMs / 1000)}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
