/**
 * A domain's allow and deny lists (`allow:` / `deny:` in its rules, types.ts ListConfig), decided
 * before any limit and without the store: a request with a descriptor entry on the deny list is
 * refused (OVER_LIMIT, envoy's only refusal; the HTTP answer is 429), else one on the allow list
 * is admitted unlimited; else the limits decide. Deny is read first: a value on both lists is
 * refused, as an explicit refusal must not be undone by a broad allowance (`10.0.0.0/8` allowed,
 * one abuser inside it denied). The lists live in the domain's compiled root, so they are swapped
 * with the rules on every reload and push.
 */
import { BlockList, isIP } from 'node:net';
import type { DomainConfig, ListConfig } from './types.js';

/** Which list decided. */
export type ListName = 'allow' | 'deny';

/** The values of one list by descriptor key: texts as written, and addresses and networks of any spelling. */
class ListValues {
  private readonly texts = new Map<string, Set<string>>();
  private readonly networks = new Map<string, BlockList>();

  constructor(entries: readonly ListConfig[]) {
    for (const { key, values } of entries) for (const value of values) this.add(key, value);
  }

  private add(key: string, value: string): void {
    const slash = value.indexOf('/');
    const address = slash < 0 ? value : value.slice(0, slash);
    const family = isIP(address);
    if (family === 0) {
      let texts = this.texts.get(key);
      if (texts === undefined) this.texts.set(key, (texts = new Set()));
      texts.add(value);
      return;
    }
    let networks = this.networks.get(key);
    if (networks === undefined) this.networks.set(key, (networks = new BlockList()));
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (slash < 0) networks.addAddress(address, type);
    else networks.addSubnet(address, Number(value.slice(slash + 1)), type);
  }

  /** Whether `value` of `key` is on the list: as written, or an address (or a masked network's address) inside one of its networks. */
  has(key: string, value: string): boolean {
    if (this.texts.get(key)?.has(value) === true) return true;
    const networks = this.networks.get(key);
    if (networks === undefined) return false;
    const slash = value.indexOf('/');
    const address = slash < 0 ? value : value.slice(0, slash);
    const family = isIP(address);
    if (family === 4) return networks.check(address, 'ipv4');
    if (family !== 6) return false;
    if (networks.check(address, 'ipv6')) return true;
    // An IPv4 client seen on a dual-stack socket (::ffff:10.1.2.3) is the IPv4 address.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    return mapped !== undefined && networks.check(mapped, 'ipv4');
  }
}

/** What a list decided for a request: the list, and the descriptor and key that matched. */
export interface ListMatch {
  readonly list: ListName;
  readonly index: number;
  readonly key: string;
}

/** What lists read of a check request (check-types.ts CheckRequest): its descriptors' entries. */
export interface ListedRequest {
  readonly descriptors: readonly { readonly entries: readonly { readonly key: string; readonly value: string }[] }[];
}

/** A domain's compiled lists. */
export class DomainLists {
  private readonly allow: ListValues | undefined;
  private readonly deny: ListValues | undefined;

  constructor(
    readonly domain: string,
    private readonly config: Pick<DomainConfig, 'allow' | 'deny'>,
  ) {
    this.allow = config.allow === undefined || config.allow.length === 0 ? undefined : new ListValues(config.allow);
    this.deny = config.deny === undefined || config.deny.length === 0 ? undefined : new ListValues(config.deny);
  }

  /**
   * The lists as `/rlconfig` shows them, one line per list and key, deny first:
   * `<domain>.deny.<key>: values=["203.0.113.0/24","2001:db8::/32"]` (the values as written, in
   * JSON; the path is the rule label list decisions carry).
   */
  dump(): string[] {
    const lines: string[] = [];
    for (const list of ['deny', 'allow'] as const) {
      const byKey = new Map<string, string[]>();
      for (const { key, values } of this.config[list] ?? []) byKey.set(key, [...(byKey.get(key) ?? []), ...values]);
      for (const [key, values] of byKey) lines.push(`${this.domain}.${list}.${key}: values=${JSON.stringify(values)}`);
    }
    return lines;
  }

  /** The list `request` is on, deny first, or undefined: the limits decide. */
  match(request: ListedRequest): ListMatch | undefined {
    if (this.deny !== undefined) {
      const found = matchIn(this.deny, request);
      if (found !== undefined) return { list: 'deny', ...found };
    }
    if (this.allow !== undefined) {
      const found = matchIn(this.allow, request);
      if (found !== undefined) return { list: 'allow', ...found };
    }
    return undefined;
  }
}

function matchIn(values: ListValues, request: ListedRequest): Omit<ListMatch, 'list'> | undefined {
  const { descriptors } = request;
  for (let index = 0; index < descriptors.length; index++) {
    for (const entry of descriptors[index]!.entries) if (values.has(entry.key, entry.value)) return { index, key: entry.key };
  }
  return undefined;
}

/** The lists of `domain`, or undefined when it has none. */
export function compileLists(domain: DomainConfig): DomainLists | undefined {
  if ((domain.allow?.length ?? 0) === 0 && (domain.deny?.length ?? 0) === 0) return undefined;
  return new DomainLists(domain.domain, domain);
}
