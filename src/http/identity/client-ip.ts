/**
 * The client's address when requests come through proxies: which peers may speak for the client
 * (`trustProxy`), which forwarded header they write, and the rate-limit key of the result
 * (`ip:1.2.3.4`, or the network of an IPv6 address such as `ip:2001:db8:1200::/56`).
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { Address, Kind, formatAddress, formatNetwork, formatV4, formatV6, parseHost, parseV4, v4Mask, v6Masks } from './addresses.js';
import { lastComma, lastElementSeparator, parseForwardedFor, parseTrimmed } from './forwarded.js';
import type { HeaderGetter } from './text.js';
import { compileTrusted, isTrusted, type TrustedRanges } from './trusted-proxies.js';
import { checkOptions, checkWholeNumber } from '../../options.js';

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
  /**
   * The client's network as CIDR text (envoy's `masked_remote_address`): the address masked to
   * `v4Prefix` (0..32) or `v6Prefix` (0..128) bits, `10.1.2.0/24`, `2001:db8:7:8::/64`. undefined
   * when no valid address is known.
   */
  masked(remoteAddress: string | undefined, header: HeaderGetter, v4Prefix: number, v6Prefix: number): string | undefined;
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

const enum Trust {
  None,
  Hops,
  Ranges,
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
  checkOptions('clientIp', options, CLIENT_IP_OPTIONS, '{ trustProxy: 1 }');
  const subnet = checkWholeNumber(options.ipv6Subnet ?? 56, { name: 'clientIp: ipv6Subnet', min: 32, max: 64, meaning: 'the prefix one IPv6 customer gets, usually 48 to 64' });
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

class ClientIpResolver implements ClientIp {
  private readonly first = new Address();
  private readonly second = new Address();
  private readonly keyMasks: Uint16Array;
  private readonly keySuffix: string;
  /** `masked`'s IPv6 masks by prefix length (a configuration names a few). */
  private readonly masks = new Map<number, Uint16Array>();
  private readonly maskedGroups = new Uint16Array(8);

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

  masked(remoteAddress: string | undefined, header: HeaderGetter, v4Prefix: number, v6Prefix: number): string | undefined {
    const client = this.resolve(remoteAddress, header);
    if (client === undefined) return undefined;
    if (client.kind === Kind.V4) return `${formatV4((client.v4 & v4Mask(v4Prefix)) >>> 0)}/${v4Prefix}`;
    let masks = this.masks.get(v6Prefix);
    if (masks === undefined) this.masks.set(v6Prefix, (masks = v6Masks(v6Prefix)));
    for (let i = 0; i < 8; i++) this.maskedGroups[i] = client.groups[i]! & masks[i]!;
    return `${formatV6(this.maskedGroups)}/${v6Prefix}`;
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
    if (this.trust === Trust.Ranges && (best === undefined || !isTrusted(this.ranges!, best))) return best;
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
      } else if (!valid || !isTrusted(this.ranges!, best!)) {
        break;
      }
      if (separator < lower) break;
      end = separator;
    }
    return best;
  }
}
