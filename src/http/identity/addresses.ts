/**
 * IP addresses: parsing, printing, and the masks of a prefix.
 *
 * Client addresses are parsed by hand (no regular expressions, no allocation until the key string
 * itself) because this runs on every request, and because `net.isIP` says whether a string is an
 * address but not which bytes it holds. Addresses are compared by value, so every spelling of one
 * address (`::ffff:1.2.3.4`, `0:0:0:0:0:ffff:102:304`, `1.2.3.4`) gives one key.
 */
import { CLOSE_BRACKET, COLON, DOT, OPEN_BRACKET, PERCENT } from './text.js';

/** Longest text taken as one address: `[` + 45 (IPv6 with a dotted quad) + zone + `]:65535`. */
const MAX_ADDRESS_TEXT = 128;
/** Longest zone id (`%eth0`) accepted; it is dropped, never part of a key. */
const MAX_ZONE = 64;

export const enum Kind {
  None = 0,
  V4 = 4,
  V6 = 6,
}

/**
 * One parsed address, reused across requests (parsing is synchronous, so a buffer cannot be
 * shared by two calls at once). IPv4, including IPv6 in `::ffff:0:0/96`, is in `v4`; other IPv6 in
 * `groups`. When the IPv4 address was written as a dotted quad, `text[start..end)` is already its
 * canonical form (leading zeros are refused), so printing it from a short text (a socket address)
 * costs at most a `slice`.
 */
export class Address {
  kind: Kind = Kind.None;
  v4 = 0;
  readonly groups = new Uint16Array(8);
  text = '';
  start = 0;
  end = 0;
  dottedSpan = false;
}

/**
 * Reads a dotted quad in `text[start..end)` as an unsigned 32-bit number, or -1. Exactly four
 * decimal octets of 0..255. A leading zero (`010.0.0.1`) is refused: `inet_aton` reads it as octal
 * (8), other parsers as decimal (10), so accepting it would let one string name two addresses.
 */
export function parseV4(text: string, start: number, end: number): number {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits === 1 && octet === 0) return -1;
      octet = octet * 10 + (c - 48);
      if (octet > 255) return -1;
      digits++;
    } else if (c === DOT) {
      if (digits === 0 || dots === 3) return -1;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
    } else {
      return -1;
    }
  }
  if (digits === 0 || dots !== 3) return -1;
  return value * 256 + octet;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 0x20;
  if (lower >= 97 && lower <= 102) return lower - 87;
  return -1;
}

/**
 * Reads IPv6 in `text[start..end)` (no brackets, no zone) into `out`: eight groups of 1 to 4 hex
 * digits, at most one `::` standing for one or more zero groups, and optionally a dotted quad as
 * the last 32 bits. Sets `out.kind` to V4 for `::ffff:0:0/96` (IPv4-mapped, by bit range, however
 * it is written), else V6; returns false for anything else (`:::`, two `::`, nine groups, a
 * five-digit group, a single leading or trailing `:`).
 *
 * Long on purpose: one pass over the characters with no allocation (it runs for every forwarded
 * hop of every request); split into helpers it would have to pass its five cursors around.
 */
export function parseV6(text: string, start: number, end: number, out: Address): boolean {
  const groups = out.groups;
  let count = 0;
  let compressAt = -1;
  let dottedStart = -1;
  let i = start;
  if (end - start < 2) return false;
  if (text.charCodeAt(i) === COLON) {
    if (text.charCodeAt(i + 1) !== COLON) return false;
    compressAt = 0;
    i += 2;
  }
  while (i < end) {
    const groupStart = i;
    let value = 0;
    let digit: number;
    while (i < end && (digit = hexValue(text.charCodeAt(i))) >= 0) {
      if (i - groupStart === 4) return false;
      value = value * 16 + digit;
      i++;
    }
    if (i === groupStart) return false;
    if (i < end && text.charCodeAt(i) === DOT) {
      if (count > 6) return false;
      const v4 = parseV4(text, groupStart, end);
      if (v4 < 0) return false;
      groups[count++] = v4 >>> 16;
      groups[count++] = v4 & 0xffff;
      dottedStart = groupStart;
      break;
    }
    if (count === 8) return false;
    groups[count++] = value;
    if (i === end) break;
    if (text.charCodeAt(i) !== COLON) return false;
    i++;
    if (i === end) return false;
    if (text.charCodeAt(i) === COLON) {
      if (compressAt >= 0) return false;
      compressAt = count;
      i++;
    }
  }
  if (compressAt < 0) {
    if (count !== 8) return false;
  } else {
    if (count === 8) return false;
    const tail = count - compressAt;
    for (let k = tail - 1; k >= 0; k--) groups[8 - tail + k] = groups[compressAt + k]!;
    for (let k = compressAt; k < 8 - tail; k++) groups[k] = 0;
  }
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    out.kind = Kind.V4;
    out.v4 = groups[6]! * 0x10000 + groups[7]!;
    out.dottedSpan = dottedStart >= 0;
    if (out.dottedSpan) setSpan(out, text, dottedStart, end);
    return true;
  }
  out.kind = Kind.V6;
  return true;
}

function setSpan(out: Address, text: string, start: number, end: number): void {
  out.text = text;
  out.start = start;
  out.end = end;
}

function parseV4Into(text: string, start: number, end: number, out: Address): boolean {
  const v4 = parseV4(text, start, end);
  if (v4 < 0) return false;
  out.kind = Kind.V4;
  out.v4 = v4;
  out.dottedSpan = true;
  setSpan(out, text, start, end);
  return true;
}

/** IPv6 with an optional zone id (`fe80::1%eth0`), which is checked and dropped. */
function parseV6WithZone(text: string, start: number, end: number, out: Address): boolean {
  // A zone holds no ':', so looking for '%' from the right stops within the last group.
  for (let i = end - 1; i >= start; i--) {
    const c = text.charCodeAt(i);
    if (c === COLON) break;
    if (c !== PERCENT) continue;
    if (end - i - 1 < 1 || end - i - 1 > MAX_ZONE) return false;
    for (let k = i + 1; k < end; k++) if (!isZoneChar(text.charCodeAt(k))) return false;
    return parseV6(text, start, i, out);
  }
  return parseV6(text, start, end, out);
}

/** RFC 6874 zone ids: unreserved characters. */
function isZoneChar(c: number): boolean {
  const lower = c | 0x20;
  return (c >= 48 && c <= 57) || (lower >= 97 && lower <= 122) || c === 45 || c === DOT || c === 95 || c === 126;
}

function isPort(text: string, start: number, end: number): boolean {
  if (end - start < 1 || end - start > 5) return false;
  let value = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return false;
    value = value * 10 + (c - 48);
  }
  return value <= 65535;
}

function indexOfChar(text: string, char: number, start: number, end: number): number {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === char) return i;
  return -1;
}

/**
 * Reads one host in `text[start..end)`: `1.2.3.4`, `1.2.3.4:80`, IPv6 (`2001:db8::1`, with an
 * optional `%zone`), `[2001:db8::1]` or `[2001:db8::1]:80`. Brackets hold IPv6 only.
 */
export function parseHost(text: string, start: number, end: number, out: Address): boolean {
  out.kind = Kind.None;
  if (end - start < 2 || end - start > MAX_ADDRESS_TEXT) return false;
  if (text.charCodeAt(start) === OPEN_BRACKET) {
    const close = indexOfChar(text, CLOSE_BRACKET, start + 1, end);
    if (close < 0) return false;
    if (close + 1 < end && (text.charCodeAt(close + 1) !== COLON || !isPort(text, close + 2, end))) return false;
    return parseV6WithZone(text, start + 1, close, out);
  }
  // A plain dotted quad, the common case, is read in one pass; anything else fails within a few characters.
  if (parseV4Into(text, start, end, out)) return true;
  // How node reports IPv4 peers of a server listening on '::' (its default): ::ffff:1.2.3.4.
  if (isMappedPrefix(text, start, end) && parseV4Into(text, start + 7, end, out)) return true;
  const colon = indexOfChar(text, COLON, start, end);
  if (colon < 0) return false;
  if (indexOfChar(text, COLON, colon + 1, end) < 0) return isPort(text, colon + 1, end) && parseV4Into(text, start, colon, out);
  return parseV6WithZone(text, start, end, out);
}

/** Hex of 0..255 without and with a leading zero: printing a group costs two look-ups, not a toString(16). */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16));
const HEX_PADDED = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

function formatGroup(value: number): string {
  const high = value >>> 8;
  return high === 0 ? HEX[value]! : HEX[high]! + HEX_PADDED[value & 0xff]!;
}

/** `text[start..)` begins with `::ffff:` (lower case, as node writes it). */
function isMappedPrefix(text: string, start: number, end: number): boolean {
  return (
    end - start > 7 &&
    text.charCodeAt(start) === COLON &&
    text.charCodeAt(start + 1) === COLON &&
    text.charCodeAt(start + 2) === 102 &&
    text.charCodeAt(start + 3) === 102 &&
    text.charCodeAt(start + 4) === 102 &&
    text.charCodeAt(start + 5) === 102 &&
    text.charCodeAt(start + 6) === COLON
  );
}

export function formatV4(v4: number): string {
  return `${v4 >>> 24}.${(v4 >>> 16) & 0xff}.${(v4 >>> 8) & 0xff}.${v4 & 0xff}`;
}

/** RFC 5952: lower-case hex without leading zeros, the first longest run of two or more zero groups as `::`. */
export function formatV6(groups: Uint16Array): string {
  let runStart = -1;
  let runLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i + 1;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > runLength) {
      runStart = i;
      runLength = j - i;
    }
    i = j;
  }
  let out = '';
  for (let i = 0; i < 8; ) {
    if (i === runStart) {
      out += '::';
      i += runLength;
      continue;
    }
    if (i > 0 && i !== runStart + runLength) out += ':';
    out += formatGroup(groups[i]!);
    i++;
  }
  return out;
}

/**
 * `groups` masked to a prefix of 32 to 64 bits, in RFC 5952 form. The last four groups are zero,
 * so the zero run that reaches the end (at least four groups) is the longest and is always the `::`.
 */
export function formatNetwork(groups: Uint16Array, masks: Uint16Array): string {
  const g2 = groups[2]! & masks[2]!;
  const g3 = groups[3]! & masks[3]!;
  let out = formatGroup(groups[0]!) + ':' + formatGroup(groups[1]!);
  if (g3 !== 0) out += ':' + formatGroup(g2) + ':' + formatGroup(g3);
  else if (g2 !== 0) out += ':' + formatGroup(g2);
  else if (groups[1] === 0) return groups[0] === 0 ? '::' : formatGroup(groups[0]!) + '::';
  return out + '::';
}

export function formatAddress(address: Address): string {
  if (address.kind === Kind.V6) return formatV6(address.groups);
  const { text, start, end } = address;
  if (!address.dottedSpan || text.length > MAX_ADDRESS_TEXT) {
    // A slice of a long header would keep the whole header alive as long as the key (V8 slices
    // point into their parent): print a fresh string instead.
    return formatV4(address.v4);
  }
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/** The masks of the first `prefix` bits of an IPv6 address, one per group. */
export function v6Masks(prefix: number): Uint16Array {
  const masks = new Uint16Array(8);
  for (let k = 0; k < 8; k++) {
    const bits = Math.min(16, Math.max(0, prefix - 16 * k));
    masks[k] = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
  }
  return masks;
}

export function v4Mask(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}

const normalizeBuffer = new Address();

/**
 * Parses and normalizes an IP literal: IPv4 as a dotted quad (IPv4-mapped IPv6, `::ffff:0:0/96`,
 * folded to IPv4), IPv6 in RFC 5952 form. Also accepts `[v6]`, `v4:port`, `[v6]:port` and a zone
 * id (`fe80::1%eth0`), which is dropped. Returns undefined for anything else, including surrounding
 * white space, octets with a leading zero (`010.1.2.3`, octal to some parsers) and the short or
 * numeric IPv4 forms (`127.1`, `2130706433`).
 */
export function normalizeIp(text: string): string | undefined {
  if (typeof text !== 'string' || !parseHost(text, 0, text.length, normalizeBuffer)) return undefined;
  return formatAddress(normalizeBuffer);
}
