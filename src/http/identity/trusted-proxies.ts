/**
 * The `trustProxy` list of clientIp, compiled once into networks and masks, and the test of one
 * address against it.
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { Address, Kind, formatV4, formatV6, parseV4, parseV6, v4Mask, v6Masks } from './addresses.js';

/** The names `trustProxy` accepts besides CIDRs (ClientIpOptions lists what each covers). */
const NAMED_RANGES: ReadonlyMap<string, readonly string[]> = new Map([
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7']],
  ['linklocal', ['169.254.0.0/16', 'fe80::/10']],
]);

/** Trusted networks, compiled once: IPv4 as (network, mask) pairs, IPv6 as per-group network and mask. */
export interface TrustedRanges {
  readonly v4: number[];
  readonly v6: Uint16Array[];
}

/** Compiles a `trustProxy` that is neither false nor a hop count; throws naming the entry at fault. */
export function compileTrusted(trustProxy: unknown): TrustedRanges {
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

/** Whether `address` lies in one of `ranges`. */
export function isTrusted(ranges: TrustedRanges, address: Address): boolean {
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
