/**
 * Who is calling: the rate-limit key of a request, independent of any HTTP framework. The
 * middleware hands in the socket address and a header reader; this file answers with a key such as
 * `ip:203.0.113.7`, `ip:2001:db8:1200::/56`, `key:<hash of an API key>` or `user:<JWT claim>`.
 *
 * Client addresses are parsed by hand (no regular expressions, no allocation until the key string
 * itself) because this runs on every request, and because `net.isIP` says whether a string is an
 * address but not which bytes it holds. Addresses are compared by value, so every spelling of one
 * address (`::ffff:1.2.3.4`, `0:0:0:0:0:ffff:102:304`, `1.2.3.4`) gives one key.
 */
import * as crypto from 'node:crypto';
import { KeyObject, createHash, createPublicKey, webcrypto, type JsonWebKey } from 'node:crypto';
import type * as Jose from 'jose';
import { currentTime } from '../clock.js';
import { InvalidOptionError, describeValue } from '../errors.js';
import { MAX_KEY_BYTES } from '../limiter.js';

/** Reads a request header by lower-case name; several values joined with ', ' (node's convention). */
export type HeaderGetter = (name: string) => string | undefined;

// ---------------------------------------------------------------------------------------------
// Parsing and printing addresses
// ---------------------------------------------------------------------------------------------

/** Longest text taken as one address: `[` + 45 (IPv6 with a dotted quad) + zone + `]:65535`. */
const MAX_ADDRESS_TEXT = 128;
/** Longest zone id (`%eth0`) accepted; it is dropped, never part of a key. */
const MAX_ZONE = 64;

const DOT = 46;
const COLON = 58;
const COMMA = 44;
const SEMICOLON = 59;
const QUOTE = 34;
const BACKSLASH = 92;
const PERCENT = 37;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const SPACE = 32;
const TAB = 9;

const enum Kind {
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
class Address {
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
function parseV4(text: string, start: number, end: number): number {
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
 */
function parseV6(text: string, start: number, end: number, out: Address): boolean {
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
function parseHost(text: string, start: number, end: number, out: Address): boolean {
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

function formatV4(v4: number): string {
  return `${v4 >>> 24}.${(v4 >>> 16) & 0xff}.${(v4 >>> 8) & 0xff}.${v4 & 0xff}`;
}

/** RFC 5952: lower-case hex without leading zeros, the first longest run of two or more zero groups as `::`. */
function formatV6(groups: Uint16Array): string {
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
function formatNetwork(groups: Uint16Array, masks: Uint16Array): string {
  const g2 = groups[2]! & masks[2]!;
  const g3 = groups[3]! & masks[3]!;
  let out = formatGroup(groups[0]!) + ':' + formatGroup(groups[1]!);
  if (g3 !== 0) out += ':' + formatGroup(g2) + ':' + formatGroup(g3);
  else if (g2 !== 0) out += ':' + formatGroup(g2);
  else if (groups[1] === 0) return groups[0] === 0 ? '::' : formatGroup(groups[0]!) + '::';
  return out + '::';
}

function formatAddress(address: Address): string {
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
function v6Masks(prefix: number): Uint16Array {
  const masks = new Uint16Array(8);
  for (let k = 0; k < 8; k++) {
    const bits = Math.min(16, Math.max(0, prefix - 16 * k));
    masks[k] = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
  }
  return masks;
}

function v4Mask(prefix: number): number {
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

// ---------------------------------------------------------------------------------------------
// Client address behind proxies
// ---------------------------------------------------------------------------------------------

export interface ClientIpOptions {
  /**
   * Which peers may set the forwarded header. false (default): only the socket address counts.
   * A number N from 1 to 64: trust the N proxies nearest to us (hop count). A string (several may
   * be separated by commas) or array of strings: CIDRs or addresses ('10.0.0.0/8', '192.168.1.7',
   * '::1', 'fd00::/8'), plus the names 'loopback' (127.0.0.0/8, ::1), 'private' (10/8, 172.16/12,
   * 192.168/16, fc00::/7), 'linklocal' (169.254/16, fe80::/10). `true` is refused: trusting every
   * peer lets any client pick its own key.
   */
  readonly trustProxy?: false | number | string | readonly string[];
  /**
   * Header read when the socket peer is trusted: 'x-forwarded-for' (default), 'forwarded' (RFC 7239
   * `for=` parameters), or 'x-real-ip' (one address). Only ONE header is ever read, so a client
   * cannot add a second header the proxy does not sanitise.
   */
  readonly proxyHeader?: 'x-forwarded-for' | 'forwarded' | 'x-real-ip';
  /** IPv6 addresses are keyed by this prefix length, 32..64 (default 56: one customer's site). */
  readonly ipv6Subnet?: number;
}

export interface ClientIp {
  /**
   * The client's address, normalized: IPv4 dotted quad (IPv4-mapped IPv6 folded to IPv4), IPv6 in
   * RFC 5952 form. undefined when no valid address is known.
   */
  address(remoteAddress: string | undefined, header: HeaderGetter): string | undefined;
  /**
   * The rate-limit key: 'ip:1.2.3.4' or 'ip:2001:db8:1200::/56' (the network of the configured
   * prefix). When no address is known: 'ip:unknown'.
   */
  key(remoteAddress: string | undefined, header: HeaderGetter): string;
}

/** The key of requests whose address is not known (no socket address, nothing valid forwarded). */
export const UNKNOWN_IP_KEY = 'ip:unknown';

/** At most this many entries are read, from the right, of a forwarded header. */
export const MAX_FORWARDED_HOPS = 64;
/** Only the last 8 KiB of a forwarded header are read; what lies further left is never looked at. */
export const MAX_FORWARDED_HEADER_READ = 8192;

const CLIENT_IP_OPTIONS = new Set(['trustProxy', 'proxyHeader', 'ipv6Subnet']);
const PROXY_HEADERS = ['x-forwarded-for', 'forwarded', 'x-real-ip'] as const;
type ProxyHeader = (typeof PROXY_HEADERS)[number];

const NAMED_RANGES: ReadonlyMap<string, readonly string[]> = new Map([
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7']],
  ['linklocal', ['169.254.0.0/16', 'fe80::/10']],
]);

const enum Trust {
  None,
  Hops,
  Ranges,
}

/** Trusted networks, compiled once: IPv4 as (network, mask) pairs, IPv6 as per-group network and mask. */
interface TrustedRanges {
  readonly v4: number[];
  readonly v6: Uint16Array[];
}

/**
 * Finds clients behind proxies. Validates `options` once and throws {@link InvalidOptionError}
 * naming the option and what to write instead.
 *
 * The forwarded chain is the chosen header's addresses (left = client side) followed by the socket
 * address. With CIDRs, the chain is walked from the socket leftward past trusted addresses; the
 * first untrusted one is the client, or the left-most when all are trusted. A socket peer that is
 * not trusted makes the header count for nothing. With a hop count N, the client is the entry N
 * places left of the socket (or the left-most). An entry that is not an address (`unknown`,
 * garbage, a `for=` that is obfuscated) is untrusted, and stands for the nearest valid address on
 * its right: the proxy that handed it over.
 */
export function clientIp(options: ClientIpOptions = {}): ClientIp {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(`clientIp options must be an object like { trustProxy: 1 }, got ${describeValue(options)}`);
  }
  for (const name of Object.keys(options)) {
    if (!CLIENT_IP_OPTIONS.has(name)) {
      throw new InvalidOptionError(`clientIp: unknown option ${JSON.stringify(name)}; the options are ${[...CLIENT_IP_OPTIONS].join(', ')}`);
    }
  }
  const subnet = options.ipv6Subnet ?? 56;
  if (!Number.isInteger(subnet) || subnet < 32 || subnet > 64) {
    throw new InvalidOptionError(`clientIp: ipv6Subnet must be an integer from 32 to 64 (the prefix one IPv6 customer gets, usually 48 to 64), got ${describeValue(options.ipv6Subnet)}`);
  }
  const header = options.proxyHeader === undefined ? 'x-forwarded-for' : String(options.proxyHeader).toLowerCase();
  if (!(PROXY_HEADERS as readonly string[]).includes(header)) {
    throw new InvalidOptionError(`clientIp: proxyHeader must be ${PROXY_HEADERS.map((name) => JSON.stringify(name)).join(', ')}, got ${describeValue(options.proxyHeader)}`);
  }
  const trustProxy = options.trustProxy ?? false;
  if (trustProxy === false) return new ClientIpResolver(Trust.None, 0, undefined, header as ProxyHeader, subnet);
  if ((trustProxy as unknown) === true) {
    throw new InvalidOptionError(
      'clientIp: trustProxy: true would trust every peer, so any client could pick its own key by sending X-Forwarded-For; ' +
        "give the number of proxies in front of this server (trustProxy: 1) or their addresses (trustProxy: ['10.0.0.0/8'] or 'loopback')",
    );
  }
  if (typeof trustProxy === 'number') {
    if (!Number.isInteger(trustProxy) || trustProxy < 1 || trustProxy > MAX_FORWARDED_HOPS) {
      throw new InvalidOptionError(
        `clientIp: trustProxy as a number counts the proxies in front of this server, an integer from 1 to ${MAX_FORWARDED_HOPS}, got ${describeValue(trustProxy)}` +
          (trustProxy === 0 ? '; write false to trust no proxy' : ''),
      );
    }
    return new ClientIpResolver(Trust.Hops, trustProxy, undefined, header as ProxyHeader, subnet);
  }
  return new ClientIpResolver(Trust.Ranges, 0, compileTrusted(trustProxy), header as ProxyHeader, subnet);
}

function compileTrusted(trustProxy: unknown): TrustedRanges {
  const entries = typeof trustProxy === 'string' ? [trustProxy] : trustProxy;
  if (!Array.isArray(entries)) {
    throw new InvalidOptionError(`clientIp: trustProxy must be false, a hop count, or CIDRs such as ['10.0.0.0/8', 'loopback'], got ${describeValue(trustProxy)}`);
  }
  const ranges: TrustedRanges = { v4: [], v6: [] };
  for (const entry of entries as unknown[]) {
    if (typeof entry !== 'string') {
      throw new InvalidOptionError(`clientIp: trustProxy entries must be strings such as '10.0.0.0/8', '::1' or 'loopback', got ${describeValue(entry)}`);
    }
    for (const part of entry.split(',')) {
      const name = part.trim();
      if (name === '') continue;
      const named = NAMED_RANGES.get(name);
      for (const cidr of named ?? [name]) addRange(ranges, cidr);
    }
  }
  if (ranges.v4.length === 0 && ranges.v6.length === 0) {
    throw new InvalidOptionError(`clientIp: trustProxy lists no address; write false to trust no proxy, or give CIDRs such as ['10.0.0.0/8']`);
  }
  return ranges;
}

function addRange(ranges: TrustedRanges, cidr: string): void {
  const slash = cidr.indexOf('/');
  const host = slash < 0 ? cidr : cidr.slice(0, slash);
  const prefixText = slash < 0 ? undefined : cidr.slice(slash + 1);
  const address = new Address();
  const v4 = parseV4(host, 0, host.length);
  if (v4 >= 0) {
    address.kind = Kind.V4;
    address.v4 = v4;
  } else if (!parseV6(host, 0, host.length, address)) {
    throw new InvalidOptionError(
      `clientIp: trustProxy entry ${JSON.stringify(cidr)} is not an address, a CIDR or one of ${[...NAMED_RANGES.keys()].join(', ')} (e.g. '10.0.0.0/8', '::1', 'loopback')`,
    );
  }
  const written = v4 >= 0 ? 32 : 128;
  const prefix = prefixText === undefined ? written : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix <= written)) {
    throw new InvalidOptionError(`clientIp: trustProxy entry ${JSON.stringify(cidr)} needs a prefix length from 0 to ${written} after the '/'`);
  }
  // An IPv6 range over ::ffff:0:0/96 is stored as IPv4, since mapped addresses are folded to IPv4.
  const asV4Prefix = address.kind === Kind.V4 ? (v4 >= 0 ? prefix : prefix - 96) : -1;
  if (asV4Prefix < 0) {
    const masks = v6Masks(prefix);
    const network = new Uint16Array(8);
    for (let k = 0; k < 8; k++) network[k] = address.groups[k]! & masks[k]!;
    if (network.some((value, k) => value !== address.groups[k])) {
      throw new InvalidOptionError(`clientIp: trustProxy entry ${JSON.stringify(cidr)} has bits set past the prefix; write ${JSON.stringify(`${formatV6(network)}/${prefix}`)}`);
    }
    const record = new Uint16Array(16);
    record.set(network, 0);
    record.set(masks, 8);
    ranges.v6.push(record);
    // A wide IPv6 range that covers all of ::ffff:0:0/96 also covers every IPv4 address.
    const mapped = new Uint16Array([0, 0, 0, 0, 0, 0xffff, 0, 0]);
    if (mapped.every((value, k) => (value & masks[k]!) === network[k])) ranges.v4.push(0, 0);
    return;
  }
  const mask = v4Mask(asV4Prefix);
  const network = (address.v4 & mask) >>> 0;
  if (network !== address.v4) {
    const suggestion = v4 >= 0 ? `${formatV4(network)}/${prefix}` : `${formatV4(network)}/${asV4Prefix}`;
    throw new InvalidOptionError(`clientIp: trustProxy entry ${JSON.stringify(cidr)} has bits set past the prefix; write ${JSON.stringify(suggestion)}`);
  }
  ranges.v4.push(network, mask);
}

class ClientIpResolver implements ClientIp {
  private readonly first = new Address();
  private readonly second = new Address();
  private readonly keyMasks: Uint16Array;
  private readonly keySuffix: string;

  constructor(
    private readonly trust: Trust,
    private readonly hops: number,
    private readonly ranges: TrustedRanges | undefined,
    private readonly header: ProxyHeader,
    subnet: number,
  ) {
    this.keyMasks = v6Masks(subnet);
    this.keySuffix = `/${subnet}`;
  }

  address(remoteAddress: string | undefined, header: HeaderGetter): string | undefined {
    const client = this.resolve(remoteAddress, header);
    return client === undefined ? undefined : formatAddress(client);
  }

  key(remoteAddress: string | undefined, header: HeaderGetter): string {
    // Fast path: no proxy, and the socket gave a plain dotted quad (already canonical).
    if (this.trust === Trust.None && remoteAddress !== undefined && parseV4(remoteAddress, 0, remoteAddress.length) >= 0) {
      return 'ip:' + remoteAddress;
    }
    const client = this.resolve(remoteAddress, header);
    if (client === undefined) return UNKNOWN_IP_KEY;
    if (client.kind === Kind.V4) return 'ip:' + formatAddress(client);
    return 'ip:' + formatNetwork(client.groups, this.keyMasks) + this.keySuffix;
  }

  /** The client's address, in one of the two reusable buffers (valid until the next call). */
  private resolve(remoteAddress: string | undefined, header: HeaderGetter): Address | undefined {
    let best: Address | undefined;
    let scratch = this.first;
    if (remoteAddress !== undefined && parseHost(remoteAddress, 0, remoteAddress.length, scratch)) {
      best = scratch;
      scratch = this.second;
    }
    if (this.trust === Trust.None) return best;
    if (this.trust === Trust.Ranges && (best === undefined || !this.isTrusted(best))) return best;
    const value = header(this.header);
    if (value === undefined || value.length === 0) return best;

    const format = this.header;
    const lower = format === 'x-real-ip' || value.length <= MAX_FORWARDED_HEADER_READ ? 0 : value.length - MAX_FORWARDED_HEADER_READ;
    let end = value.length;
    for (let hop = 1; hop <= MAX_FORWARDED_HOPS; hop++) {
      const separator =
        format === 'x-forwarded-for' ? lastComma(value, lower, end) : format === 'forwarded' ? lastElementSeparator(value, lower, end) : -1;
      // The left-most entry read is cut in two when the header is longer than what is read.
      const cut = separator < lower && lower > 0;
      const valid =
        !cut &&
        (format === 'forwarded' ? parseForwardedFor(value, separator + 1, end, scratch) : parseTrimmed(value, separator + 1, end, scratch));
      if (valid) {
        best = scratch;
        scratch = best === this.first ? this.second : this.first;
      }
      if (this.trust === Trust.Hops) {
        if (hop === this.hops) break;
      } else if (!valid || !this.isTrusted(best!)) {
        break;
      }
      if (separator < lower) break;
      end = separator;
    }
    return best;
  }

  private isTrusted(address: Address): boolean {
    const ranges = this.ranges!;
    if (address.kind === Kind.V4) {
      const v4 = ranges.v4;
      for (let i = 0; i < v4.length; i += 2) if ((address.v4 & v4[i + 1]!) >>> 0 === v4[i]) return true;
      return false;
    }
    const groups = address.groups;
    next: for (const record of ranges.v6) {
      for (let k = 0; k < 8; k++) if ((groups[k]! & record[k + 8]!) !== record[k]) continue next;
      return true;
    }
    return false;
  }
}

function isSpace(c: number): boolean {
  return c === SPACE || c === TAB;
}

/** An entry between commas, optional white space around it. */
function parseTrimmed(text: string, start: number, end: number, out: Address): boolean {
  while (start < end && isSpace(text.charCodeAt(start))) start++;
  while (end > start && isSpace(text.charCodeAt(end - 1))) end--;
  return parseHost(text, start, end, out);
}

/** Index of the last ',' in `text[lower..end)`, or lower - 1. */
function lastComma(text: string, lower: number, end: number): number {
  let i = end - 1;
  while (i >= lower && text.charCodeAt(i) !== COMMA) i--;
  return i;
}

/**
 * Index of the last ',' outside a quoted string in `text[lower..end)`, or lower - 1. Read from the
 * right, where the proxies write: a client's unbalanced quote further left cannot hide their entries.
 */
function lastElementSeparator(text: string, lower: number, end: number): number {
  let quoted = false;
  let i = end - 1;
  for (; i >= lower; i--) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let backslashes = 0;
      while (i - backslashes - 1 >= lower && text.charCodeAt(i - backslashes - 1) === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) quoted = !quoted;
    } else if (c === COMMA && !quoted) {
      break;
    }
  }
  return i;
}

/**
 * The `for=` address of one RFC 7239 element (`for=192.0.2.60;proto=http;by=203.0.113.43`). The
 * value may be quoted (`for="[2001:db8::1]:4711"`, required for IPv6). `unknown`, an obfuscated
 * `_name` or port, a quoted value with escapes, no `for=` or two of them: not an address.
 */
function parseForwardedFor(text: string, start: number, end: number, out: Address): boolean {
  let found = false;
  let valid = false;
  let pairStart = start;
  while (pairStart < end) {
    let pairEnd = pairStart;
    let quoted = false;
    for (; pairEnd < end; pairEnd++) {
      const c = text.charCodeAt(pairEnd);
      if (quoted) {
        if (c === BACKSLASH) pairEnd++;
        else if (c === QUOTE) quoted = false;
      } else if (c === QUOTE) {
        quoted = true;
      } else if (c === SEMICOLON) {
        break;
      }
    }
    pairEnd = Math.min(pairEnd, end);
    let s = pairStart;
    let e = pairEnd;
    while (s < e && isSpace(text.charCodeAt(s))) s++;
    while (e > s && isSpace(text.charCodeAt(e - 1))) e--;
    if (
      e - s > 4 &&
      (text.charCodeAt(s) | 0x20) === 102 &&
      (text.charCodeAt(s + 1) | 0x20) === 111 &&
      (text.charCodeAt(s + 2) | 0x20) === 114 &&
      text.charCodeAt(s + 3) === 61
    ) {
      if (found) return false;
      found = true;
      let valueStart = s + 4;
      let valueEnd = e;
      if (text.charCodeAt(valueStart) === QUOTE) {
        if (valueEnd - valueStart < 2 || text.charCodeAt(valueEnd - 1) !== QUOTE) return false;
        valueStart++;
        valueEnd--;
      }
      valid = parseHost(text, valueStart, valueEnd, out);
    }
    pairStart = pairEnd + 1;
  }
  return valid;
}

// ---------------------------------------------------------------------------------------------
// Credentials: API keys and JWTs
// ---------------------------------------------------------------------------------------------

/** Longest API key hashed; a longer header is not a key. */
export const MAX_API_KEY_LENGTH = 4096;
/** Longest JWT looked at; a longer one is not verified. */
export const MAX_JWT_LENGTH = 8192;

/** Reads `header`, strips `scheme` (case-insensitive, then spaces) when given. */
interface CredentialReader {
  readonly header: string;
  /** Lower-case scheme without the trailing space, or undefined. */
  readonly scheme: string | undefined;
}

function credentialReader(where: string, header: unknown, scheme: unknown, defaultHeader: string): CredentialReader {
  if (header !== undefined && (typeof header !== 'string' || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(header))) {
    throw new InvalidOptionError(`${where}: header must be a header name such as ${JSON.stringify(defaultHeader)}, got ${describeValue(header)}`);
  }
  const name = (header ?? defaultHeader).toLowerCase();
  if (scheme !== undefined && (typeof scheme !== 'string' || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ *$/.test(scheme))) {
    throw new InvalidOptionError(`${where}: scheme must be an authentication scheme such as 'Bearer', got ${describeValue(scheme)}`);
  }
  const written = scheme === undefined ? (name === 'authorization' ? 'Bearer' : undefined) : scheme.trimEnd();
  return { header: name, scheme: written?.toLowerCase() };
}

function readCredential(reader: CredentialReader, header: HeaderGetter): string | undefined {
  const value = header(reader.header);
  if (value === undefined) return undefined;
  const scheme = reader.scheme;
  if (scheme === undefined) return value.trim();
  const n = scheme.length;
  if (value.length <= n + 1 || value.charCodeAt(n) !== SPACE || value.slice(0, n).toLowerCase() !== scheme) return undefined;
  return value.slice(n + 1).trim();
}

export interface ApiKeyOptions {
  /** Header carrying the key (default 'x-api-key'). */
  readonly header?: string;
  /**
   * Authentication scheme stripped before the key (case-insensitive), e.g. 'Bearer'. Defaults to
   * 'Bearer' when `header` is 'authorization', to none otherwise. A header without it is no key.
   */
  readonly scheme?: string;
}

const API_KEY_OPTIONS = new Set(['header', 'scheme']);

/**
 * Identity from an API key: 'key:' + base64url of the first 16 bytes of SHA-256(key), so the raw
 * key never becomes a store key (nor appears in Redis or metrics). undefined when the header is
 * absent, empty or longer than 4096 characters.
 *
 * The key is not checked against anything: a client can invent any number of keys, so use this
 * for requests your application has already authenticated, or alongside a per-IP limit.
 */
export function apiKeyIdentity(options: ApiKeyOptions = {}): (header: HeaderGetter) => string | undefined {
  checkOptions('apiKeyIdentity', options, API_KEY_OPTIONS, "{ header: 'x-api-key' }");
  const reader = credentialReader('apiKeyIdentity', options.header, options.scheme, 'x-api-key');
  return (header) => {
    const key = readCredential(reader, header);
    if (key === undefined || key.length === 0 || key.length > MAX_API_KEY_LENGTH) return undefined;
    return 'key:' + digest16(key);
  };
}

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** `crypto.hash` (node ≥ 20.12) hashes in one call, a fifth of the cost of createHash(). */
const oneShotHash = (crypto as { hash?: typeof crypto.hash }).hash;

/** base64url of the first 16 bytes of SHA-256(text). */
function digest16(text: string): string {
  if (oneShotHash === undefined) return createHash('sha256').update(text).digest().subarray(0, 16).toString('base64url');
  // Of the full digest in base64url, characters 0..20 are bytes 0..15 but for byte 15's last two
  // bits, which character 21 holds in its top bits beside byte 16's first four: keep those two.
  const full = oneShotHash('sha256', text, 'base64url');
  return full.slice(0, 21) + BASE64URL[BASE64URL.indexOf(full[21]!) & 0x30];
}

function checkOptions(where: string, options: unknown, known: ReadonlySet<string>, example: string): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidOptionError(`${where} options must be an object like ${example}, got ${describeValue(options)}`);
  }
  for (const name of Object.keys(options)) {
    if (!known.has(name)) throw new InvalidOptionError(`${where}: unknown option ${JSON.stringify(name)}; the options are ${[...known].join(', ')}`);
  }
}

export interface JwtOptions {
  /** Claim naming the user (default 'sub'); must be a non-empty string or a number in the token. */
  readonly claim?: string;
  /**
   * Exactly one of: an HMAC secret (string or Uint8Array), a public key (PEM string for SPKI or an
   * X.509 certificate, a public JWK object, or a KeyObject/CryptoKey), or a JWKS URL.
   */
  readonly secret?: string | Uint8Array;
  readonly publicKey?: string | object;
  readonly jwksUrl?: string;
  /**
   * Allowed algorithms (required with publicKey/jwksUrl; default ['HS256','HS384','HS512'] with
   * secret). Never 'none'; HMAC only with a secret, so a public key can never be used as an HMAC
   * secret.
   */
  readonly algorithms?: readonly string[];
  /** Accepted `iss` values; when given, a token without one of them is refused. */
  readonly issuer?: string | readonly string[];
  /** Accepted `aud` values; when given, a token without one of them is refused. */
  readonly audience?: string | readonly string[];
  /** Header (default 'authorization'). */
  readonly header?: string;
  /** Scheme before the token (default 'Bearer' for the authorization header, none for others). */
  readonly scheme?: string;
  /** Clock, epoch milliseconds (default: the process clock): for checking exp/nbf and the cache. */
  readonly now?: () => number;
  /** Verified tokens remembered (default 10,000; 0 turns the cache off). */
  readonly cacheSize?: number;
  /**
   * Called with errors that are not the token's fault: the JWKS URL unreachable or serving
   * garbage, a key jose refuses. The request still gets undefined. Token faults are not reported.
   */
  readonly onError?: (error: unknown) => void;
}

const JWT_OPTIONS = new Set(['claim', 'secret', 'publicKey', 'jwksUrl', 'algorithms', 'issuer', 'audience', 'header', 'scheme', 'now', 'cacheSize', 'onError']);
const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'];
const PUBLIC_KEY_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** A verified token without `exp` (or with a far one) is verified again after this long. */
export const MAX_JWT_CACHE_MS = 60_000;
/** jose error codes that mean "this token is no good", as opposed to "we could not check it". */
const TOKEN_FAULTS = new Set([
  'ERR_JWT_EXPIRED',
  'ERR_JWT_CLAIM_VALIDATION_FAILED',
  'ERR_JWT_INVALID',
  'ERR_JWS_INVALID',
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
]);

/** Algorithms each public key type can verify; EC keys by curve. */
function algorithmsForKey(key: KeyObject): readonly string[] {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss':
      return ['PS256', 'PS384', 'PS512'];
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      return curve === 'prime256v1' ? ['ES256'] : curve === 'secp384r1' ? ['ES384'] : curve === 'secp521r1' ? ['ES512'] : [];
    }
    case 'ed25519':
      return ['EdDSA', 'Ed25519'];
    default:
      return [];
  }
}

let josePromise: Promise<typeof Jose> | undefined;

/** jose is loaded on the first token, so applications without JWT identity never load it. */
function loadJose(): Promise<typeof Jose> {
  return (josePromise ??= import('jose'));
}

type VerifyKey = Uint8Array | KeyObject | ReturnType<typeof Jose.createRemoteJWKSet>;

interface CachedIdentity {
  readonly identity: string;
  readonly expiresAt: number;
}

/**
 * Identity from a JWT: 'user:' + the claim's value for a token that verifies (signature, exp/nbf,
 * iss, aud), otherwise undefined (absent, malformed, expired, bad signature): it never rejects on
 * request input. Verified tokens are cached (least recently used first out, `cacheSize` entries,
 * each until its `exp` and at most a minute) so a hot token is not verified on every request.
 */
export function jwtIdentity(options: JwtOptions): (header: HeaderGetter) => Promise<string | undefined> {
  checkOptions('jwtIdentity', options, JWT_OPTIONS, "{ secret: process.env.JWT_SECRET }");
  const verifier = new JwtVerifier(options);
  return (header) => verifier.identify(header);
}

class JwtVerifier {
  private readonly reader: CredentialReader;
  private readonly claim: string;
  private readonly algorithms: string[];
  private readonly issuer: string[] | undefined;
  private readonly audience: string[] | undefined;
  private readonly now: () => number;
  private readonly cacheSize: number;
  private readonly onError: ((error: unknown) => void) | undefined;
  private readonly jwksUrl: URL | undefined;
  private key: VerifyKey | undefined;
  /** Token → identity; a Map iterates in insertion order, so its first key is the least recently used. */
  private readonly cache = new Map<string, CachedIdentity>();

  constructor(options: JwtOptions) {
    const where = 'jwtIdentity';
    this.reader = credentialReader(where, options.header, options.scheme, 'authorization');
    const claim = options.claim ?? 'sub';
    if (typeof claim !== 'string' || claim === '') {
      throw new InvalidOptionError(`${where}: claim must be the name of a claim such as 'sub' or 'user_id', got ${describeValue(options.claim)}`);
    }
    this.claim = claim;
    const sources = (['secret', 'publicKey', 'jwksUrl'] as const).filter((name) => options[name] !== undefined);
    if (sources.length !== 1) {
      throw new InvalidOptionError(
        `${where}: give exactly one of secret (HMAC), publicKey (PEM, JWK or KeyObject) or jwksUrl, got ${sources.length === 0 ? 'none' : sources.join(' and ')}`,
      );
    }
    const algorithms = options.algorithms;
    if (algorithms !== undefined && (!Array.isArray(algorithms) || algorithms.length === 0 || !algorithms.every((name) => typeof name === 'string'))) {
      throw new InvalidOptionError(`${where}: algorithms must be a non-empty array such as ['RS256'], got ${describeValue(algorithms)}`);
    }
    for (const name of algorithms ?? []) {
      if (name.toLowerCase() === 'none') {
        throw new InvalidOptionError(`${where}: algorithms must not contain ${JSON.stringify(name)}: an unsigned token proves nothing; list signing algorithms such as 'RS256'`);
      }
    }
    if (sources[0] === 'secret') {
      const secret = options.secret;
      if (!(typeof secret === 'string' || secret instanceof Uint8Array) || secret.length === 0) {
        throw new InvalidOptionError(`${where}: secret must be a non-empty string or Uint8Array (the HMAC key), got ${describeValue(secret)}`);
      }
      this.algorithms = [...(algorithms ?? HMAC_ALGORITHMS)];
      const wrong = this.algorithms.filter((name) => !HMAC_ALGORITHMS.includes(name));
      if (wrong.length > 0) {
        throw new InvalidOptionError(`${where}: with a secret, algorithms must be among ${HMAC_ALGORITHMS.join(', ')}, got ${wrong.join(', ')}; for RS256/ES256 tokens give publicKey or jwksUrl`);
      }
      this.key = typeof secret === 'string' ? new TextEncoder().encode(secret) : new Uint8Array(secret);
    } else {
      if (algorithms === undefined) {
        throw new InvalidOptionError(`${where}: with ${sources[0]}, list the algorithms your tokens are signed with, e.g. algorithms: ['RS256']`);
      }
      this.algorithms = [...algorithms];
      const wrong = this.algorithms.filter((name) => !PUBLIC_KEY_ALGORITHMS.includes(name));
      if (wrong.length > 0) {
        throw new InvalidOptionError(
          `${where}: with ${sources[0]}, algorithms must be among ${PUBLIC_KEY_ALGORITHMS.join(', ')}, got ${wrong.join(', ')}` +
            (wrong.some((name) => HMAC_ALGORITHMS.includes(name)) ? '; HMAC tokens need secret instead' : ''),
        );
      }
      if (sources[0] === 'publicKey') {
        const key = publicKeyObject(options.publicKey);
        const usable = algorithmsForKey(key);
        const unusable = this.algorithms.filter((name) => !usable.includes(name));
        if (unusable.length > 0) {
          throw new InvalidOptionError(
            `${where}: the publicKey (${key.asymmetricKeyType ?? 'unknown type'}) cannot verify ${unusable.join(', ')}; ` +
              (usable.length > 0 ? `it can verify ${usable.join(', ')}` : 'use an RSA, EC (P-256, P-384, P-521) or Ed25519 key'),
          );
        }
        this.key = key;
      } else {
        const url = options.jwksUrl;
        let parsed: URL | undefined;
        try {
          parsed = typeof url === 'string' ? new URL(url) : undefined;
        } catch {
          parsed = undefined;
        }
        if (parsed === undefined || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
          throw new InvalidOptionError(`${where}: jwksUrl must be an http(s) URL such as 'https://issuer.example/.well-known/jwks.json', got ${describeValue(url)}`);
        }
        this.jwksUrl = parsed;
      }
    }
    this.issuer = stringList(where, 'issuer', options.issuer);
    this.audience = stringList(where, 'audience', options.audience);
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new InvalidOptionError(`${where}: now must be a function returning epoch ms, got ${describeValue(options.now)}`);
    }
    this.now = options.now ?? currentTime;
    const cacheSize = options.cacheSize ?? 10_000;
    if (!Number.isInteger(cacheSize) || cacheSize < 0) {
      throw new InvalidOptionError(`${where}: cacheSize must be an integer ≥ 0 (verified tokens remembered; 0 turns the cache off), got ${describeValue(options.cacheSize)}`);
    }
    this.cacheSize = cacheSize;
    if (options.onError !== undefined && typeof options.onError !== 'function') {
      throw new InvalidOptionError(`${where}: onError must be a function, got ${describeValue(options.onError)}`);
    }
    this.onError = options.onError;
  }

  identify(header: HeaderGetter): Promise<string | undefined> {
    const token = readCredential(this.reader, header);
    if (token === undefined || !looksLikeJws(token)) return Promise.resolve(undefined);
    const now = this.now();
    const cached = this.cache.get(token);
    if (cached !== undefined) {
      this.cache.delete(token);
      if (now < cached.expiresAt) {
        this.cache.set(token, cached);
        return Promise.resolve(cached.identity);
      }
    }
    return this.verify(token, now);
  }

  private async verify(token: string, now: number): Promise<string | undefined> {
    let payload: Jose.JWTPayload;
    try {
      const jose = await loadJose();
      const key = (this.key ??= jose.createRemoteJWKSet(this.jwksUrl!));
      const options: Jose.JWTVerifyOptions = { algorithms: this.algorithms, currentDate: new Date(now) };
      if (this.issuer !== undefined) options.issuer = this.issuer;
      if (this.audience !== undefined) options.audience = this.audience;
      payload = (typeof key === 'function' ? await jose.jwtVerify(token, key, options) : await jose.jwtVerify(token, key, options)).payload;
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (this.onError !== undefined && !(typeof code === 'string' && TOKEN_FAULTS.has(code))) {
        try {
          this.onError(error);
        } catch {
          // A failing reporter must not fail the request.
        }
      }
      return undefined;
    }
    const value = payload[this.claim];
    if (!((typeof value === 'string' && value !== '') || (typeof value === 'number' && Number.isFinite(value)))) return undefined;
    const identity = 'user:' + value;
    if (identity.length > MAX_KEY_BYTES / 3 && Buffer.byteLength(identity) > MAX_KEY_BYTES) return undefined;
    if (this.cacheSize > 0) {
      const expiresAt = Math.min(typeof payload.exp === 'number' ? payload.exp * 1000 : Infinity, now + MAX_JWT_CACHE_MS);
      this.cache.delete(token); // verified twice at once: one entry, and no needless eviction
      if (this.cache.size >= this.cacheSize) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(token, { identity, expiresAt });
    }
    return identity;
  }
}

/** Three base64url segments (header and payload non-empty), cheap to check before any crypto. */
function looksLikeJws(token: string): boolean {
  if (token.length > MAX_JWT_LENGTH) return false;
  let dots = 0;
  let segmentLength = 0;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c === DOT) {
      if (segmentLength === 0 || dots === 2) return false;
      dots++;
      segmentLength = 0;
    } else if ((c >= 48 && c <= 57) || ((c | 0x20) >= 97 && (c | 0x20) <= 122) || c === 45 || c === 95) {
      segmentLength++;
    } else {
      return false;
    }
  }
  return dots === 2;
}

function stringList(where: string, name: string, value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((item) => typeof item === 'string' && item !== '')) {
    throw new InvalidOptionError(`${where}: ${name} must be a non-empty string or array of strings, got ${describeValue(value)}`);
  }
  return [...(list as string[])];
}

/** The public key as a KeyObject, checked now so a bad key fails at startup, not on the first request. */
function publicKeyObject(value: unknown): KeyObject {
  const where = 'jwtIdentity';
  let key: KeyObject;
  try {
    if (typeof value === 'string') {
      if (value.includes('PRIVATE KEY')) {
        throw new InvalidOptionError(`${where}: publicKey is a private key; give the public key (-----BEGIN PUBLIC KEY-----), the private key stays with the issuer`);
      }
      if (!value.includes('-----BEGIN ')) {
        throw new InvalidOptionError(`${where}: publicKey as a string must be PEM (-----BEGIN PUBLIC KEY----- or a certificate); for a JWK give the object`);
      }
      key = createPublicKey(value);
    } else if (value instanceof KeyObject) {
      key = value;
    } else if (typeof value === 'object' && value !== null && Object.prototype.toString.call(value) === '[object CryptoKey]') {
      // Node 20 has no CryptoKey class to test with instanceof; its instances carry the tag.
      key = KeyObject.from(value as webcrypto.CryptoKey);
    } else if (typeof value === 'object' && value !== null && typeof (value as { kty?: unknown }).kty === 'string') {
      const jwk = value as { kty: string; d?: unknown };
      if (jwk.d !== undefined) throw new InvalidOptionError(`${where}: publicKey is a private JWK (it has "d"); give the public key only`);
      if (jwk.kty === 'oct') throw new InvalidOptionError(`${where}: publicKey is a symmetric JWK (kty "oct"); give it as secret instead`);
      key = createPublicKey({ key: value as JsonWebKey, format: 'jwk' });
    } else {
      throw new InvalidOptionError(`${where}: publicKey must be a PEM string, a public JWK object or a KeyObject/CryptoKey, got ${describeValue(value)}`);
    }
  } catch (error) {
    if (error instanceof InvalidOptionError) throw error;
    throw new InvalidOptionError(`${where}: publicKey cannot be read: ${(error as Error).message}`);
  }
  if (key.type !== 'public') {
    throw new InvalidOptionError(`${where}: publicKey must be a public key, got a ${key.type} key${key.type === 'secret' ? '; give it as secret instead' : ''}`);
  }
  return key;
}
