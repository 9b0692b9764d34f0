/**
 * A request as the gateway's routes and actions see it: its headers (several lines of one name
 * joined with `, ` as node joins them; a header a limit counts must come once, `repeatedHeader`)
 * and envoy's pseudo-headers `:path`, `:method`, `:authority` and `:scheme`; and envoy's header
 * matchers over them.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HeaderMatcher } from './config/types.js';

/** What the gateway reads of a request: a live `IncomingMessage`, or a deferred one replayed. */
export interface RequestFacts {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: IncomingHttpHeaders;
  /** `encrypted`: the request came over TLS (a node:tls socket says so), `:scheme` is then https. */
  readonly socket: { readonly remoteAddress?: string | undefined; readonly encrypted?: boolean | undefined };
}

/** The request's facts routes and actions read; built once per request. */
export class GatewayRequest {
  /** Method, upper-case. */
  readonly method: string;
  /** The path as the gateway forwards it (normalised, src/gateway/paths.ts), query string included (`:path`). */
  readonly target: string;
  /** The path without its query string. */
  readonly path: string;
  /** The host without its port or a trailing dot, lower-case ('' when none). */
  readonly host: string;
  private lowerCase: string | undefined;

  constructor(readonly incoming: RequestFacts) {
    this.method = incoming.method ?? 'GET';
    this.target = incoming.url ?? '/';
    const query = this.target.indexOf('?');
    this.path = query === -1 ? this.target : this.target.slice(0, query);
    this.host = hostName(incoming.headers.host ?? '');
  }

  /** `target` in lower case, for routes that are not case-sensitive. */
  get lowerCaseTarget(): string {
    return (this.lowerCase ??= this.target.toLowerCase());
  }

  /** A header's value (`name` lower-case), or a pseudo-header; undefined when absent. */
  header(name: string): string | undefined {
    if (name.charCodeAt(0) === 58 /* ':' */) {
      if (name === ':path') return this.target;
      if (name === ':method') return this.method;
      if (name === ':authority') return this.incoming.headers.host;
      if (name === ':scheme') return this.incoming.socket.encrypted === true ? 'https' : 'http';
      return undefined;
    }
    const value = this.incoming.headers[name];
    return Array.isArray(value) ? value.join(',') : value;
  }
}

/**
 * The first of `names` (lower-case) that `rawHeaders` (node's `[name, value, ...]`) carries on more
 * than one line, or undefined. envoy counts a repeated header's first line; an upstream may read
 * the first, the last or all of them joined, so a header a limit counts must come once.
 */
export function repeatedHeader(rawHeaders: readonly string[], names: readonly string[]): string | undefined {
  if (names.length === 0) return undefined;
  for (const name of names) {
    let seen = 0;
    for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === name.length && rawHeaders[i]!.toLowerCase() === name && ++seen > 1) return name;
  }
  return undefined;
}

/** `Host` without the port or a trailing dot: `API.example.com.:8080` → `api.example.com`, `[::1]:80` → `[::1]`. */
function hostName(host: string): string {
  const lower = host.toLowerCase();
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1);
  const colon = lower.indexOf(':');
  const name = colon === -1 ? lower : lower.slice(0, colon);
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/**
 * envoy's HeaderMatcher: an absent header matches only `present: false`; `invert_match` then flips
 * the outcome (so an absent header matches an inverted `exact`).
 */
export function headerMatches(matcher: HeaderMatcher, request: GatewayRequest): boolean {
  const raw = request.header(matcher.name);
  return compare(matcher, raw) !== matcher.invert;
}

function compare(matcher: HeaderMatcher, raw: string | undefined): boolean {
  if (matcher.kind === 'present') return (raw !== undefined) === matcher.present;
  if (raw === undefined) return false;
  const value = matcher.ignoreCase ? raw.toLowerCase() : raw;
  switch (matcher.kind) {
    case 'exact':
      return value === matcher.value;
    case 'prefix':
      return value.startsWith(matcher.value!);
    case 'suffix':
      return value.endsWith(matcher.value!);
    case 'contains':
      return value.includes(matcher.value!);
    case 'safe_regex':
      return matcher.regex!.test(raw);
  }
}

/** Whether every matcher matches (envoy's routes and header_value_match take all of them). */
export function allHeadersMatch(matchers: readonly HeaderMatcher[], request: GatewayRequest): boolean {
  for (const matcher of matchers) if (!headerMatches(matcher, request)) return false;
  return true;
}
