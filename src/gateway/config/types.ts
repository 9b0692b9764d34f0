/**
 * The parsed gateway configuration (`tollgate gateway --config FILE`): upstreams, the rules to
 * load, and routes that map a request to envoy rate-limit descriptors. Shaped like envoy's route
 * configuration so its users recognise it; docs/gateway.md is the reference.
 */
import type { HeaderStyle } from '../../http/report.js';
import type { PathSettings } from '../paths.js';
import type { WaitingRoomSettings } from '../waiting-room/config.js';

/** How a header matcher compares a header's value (envoy's HeaderMatcher / StringMatcher). */
export type HeaderMatchKind = 'exact' | 'prefix' | 'suffix' | 'contains' | 'safe_regex' | 'present';

/** envoy's HeaderMatcher: `name` plus one comparison; `invert_match` flips the outcome. */
export interface HeaderMatcher {
  /** Lower-case; `:path`, `:method`, `:authority` and `:scheme` are the pseudo-headers. */
  readonly name: string;
  readonly kind: HeaderMatchKind;
  /** The text compared (exact, prefix, suffix, contains), lower-cased when `ignoreCase`. */
  readonly value?: string;
  /** safe_regex: matched against the whole value. */
  readonly regex?: RegExp;
  /** present: whether the header must be there (true) or absent (false). */
  readonly present?: boolean;
  readonly ignoreCase: boolean;
  readonly invert: boolean;
}

/** One envoy rate-limit action (`config.route.v3.RateLimit.Action`): it yields one descriptor entry. */
export type RateLimitAction =
  | { readonly type: 'source_cluster' }
  | { readonly type: 'destination_cluster' }
  | { readonly type: 'request_headers'; readonly headerName: string; readonly descriptorKey: string; readonly skipIfAbsent: boolean }
  | { readonly type: 'remote_address' }
  /** envoy's `masked_remote_address`: the client's network, `10.1.2.0/24`; defaults 32 and 128, the whole address. */
  | { readonly type: 'masked_remote_address'; readonly v4PrefixLength: number; readonly v6PrefixLength: number }
  | { readonly type: 'generic_key'; readonly descriptorKey: string; readonly descriptorValue: string }
  | {
      readonly type: 'header_value_match';
      readonly descriptorKey: string;
      readonly descriptorValue: string;
      readonly expectMatch: boolean;
      readonly headers: readonly HeaderMatcher[];
    };

/** One item of a route's `rate_limits`: it yields one descriptor (or none, when an action cannot). */
export interface RateLimitConfig {
  readonly actions: readonly RateLimitAction[];
  /** envoy's `hits_addend: { number: N }`: the hits of this descriptor, instead of the request's 1. */
  readonly hitsAddend?: number;
  /** envoy's `apply_on_stream_done`: sent once the response has been forwarded, not before. */
  readonly applyOnStreamDone: boolean;
}

/** What a request must be for a route to take it (every given condition). */
export interface RouteMatch {
  /** The start of the normalised path, query string included (envoy's `prefix`); lower-case when not `caseSensitive`. */
  readonly prefix?: string;
  /** The whole normalised path without its query string (envoy's `path`); lower-case when not `caseSensitive`. */
  readonly path?: string;
  /** envoy's `case_sensitive` (default true): whether `prefix` and `path` compare case; `safe_regex` always does. */
  readonly caseSensitive: boolean;
  /** Matches the whole path without its query string (envoy's `safe_regex`). */
  readonly regex?: RegExp;
  /** Upper-case methods; absent: any. */
  readonly methods?: readonly string[];
  /** Lower-case host names (`Host`, without a port); `*.example.com` takes any subdomain, `*` any host. */
  readonly hosts?: readonly string[];
  readonly headers: readonly HeaderMatcher[];
}

/** What a throttled request gets: a 429 (`reject`), a wait for its turn (`shape`), or a place in a queue (`defer`). */
export type OnLimit = 'reject' | 'shape' | 'defer';

/** A defer route's queue (`defer:` block; docs/gateway.md, "Deferred processing"). */
export interface DeferSettings {
  /** The queue's name (`queue`); default `<domain>:<route index>`, stable while the routes keep their order. */
  readonly queue: string;
  /** Most requests the queue holds, waiting or being delivered (`max_length`); past it, 429. */
  readonly maxLength: number;
  /** Largest body kept (`max_body`), in bytes; a longer one is answered 413. */
  readonly maxBodyBytes: number;
  /** Delivery attempts before a ticket is marked failed (`max_attempts`). */
  readonly maxAttempts: number;
  /** How long a result stays readable at the status URL (`result_ttl`), in ms. */
  readonly resultTtlMs: number;
  /** A request pending this long on a gateway that stopped answering is taken over by another (`reclaim_after`), in ms. */
  readonly reclaimAfterMs: number;
}

export interface RouteConfig {
  readonly match: RouteMatch;
  /** A name in `upstreams`; also the value of `destination_cluster`. */
  readonly upstream: string;
  /** The rules domain its descriptors are checked in (required when it has rate_limits). */
  readonly domain: string | undefined;
  readonly rateLimits: readonly RateLimitConfig[];
  /** Longest wait for the upstream's response headers, and between two body chunks, in ms. */
  readonly timeoutMs: number;
  readonly onLimit: OnLimit;
  /** shape: the longest a request is held before it goes on (a longer wait is refused). */
  readonly maxDelayMs: number | undefined;
  /** defer: its queue's settings. */
  readonly defer?: DeferSettings;
  /** `waiting_room:` (docs/gateway.md, "Waiting room"): decided before the rate limits. */
  readonly waitingRoom?: WaitingRoomSettings;
  /** Where the route was written, for logs: `file:line`. */
  readonly where: string;
}

/** One upstream (`upstreams: { name: URL }`, or `{ url, tls }`). */
export interface UpstreamConfig {
  /** The origin: scheme, host and port. */
  readonly url: URL;
  /** https:// only: a private CA, a name to verify; absent: Node's bundled CAs and the URL's host name. */
  readonly tls?: UpstreamTls;
  /**
   * `max_connections` (envoy's circuit breaker of that name): at most this many connections to the
   * upstream at once, from this process; requests beyond them wait for a free one. Absent: 256.
   */
  readonly maxConnections?: number;
}

/** How an https:// upstream's certificate is verified (envoy's UpstreamTlsContext `trusted_ca`, `sni`). */
export interface UpstreamTls {
  /** `ca_file`, resolved against the configuration's folder. */
  readonly caFile?: string;
  /** Its PEM certificates, read at load: trusted instead of Node's bundled CAs. */
  readonly ca?: Buffer;
  /** `server_name`: sent as SNI, and the name the certificate must carry (default: the URL's host name). */
  readonly serverName?: string;
}

export interface GatewayConfig {
  /** Where the gateway listens (`listen: 8888` or `listen: "127.0.0.1:8888"`); flags win. */
  readonly listen: { readonly host?: string; readonly port: number } | undefined;
  /** The value of `source_cluster` (envoy's `--service-cluster`). */
  readonly sourceCluster: string;
  /** Upstream name → its origin (`http://host:port`) and, for https://, how its certificate is verified. */
  readonly upstreams: ReadonlyMap<string, UpstreamConfig>;
  /** The rules file or directory, resolved against the config file's folder. */
  readonly rules: string | undefined;
  readonly routes: readonly RouteConfig[];
  /** Which peers may say who the client is (X-Forwarded-For), for `remote_address`; the middleware's `trustProxy`. */
  readonly trustProxy: false | number | readonly string[];
  /** IPv6 clients' `remote_address` is their network of this many bits (`ipv6_subnet`, 32..64, default 56: the middleware's `ipv6Subnet`). */
  readonly ipv6Subnet: number;
  /** Which rate-limit headers answers carry (the middleware's `headers`): legacy (default), ietf, both, none. */
  readonly headers: HeaderStyle;
  /** Longest wait for an upstream connection, in ms. */
  readonly connectTimeoutMs: number;
  /** How request paths are normalised before routes see them (`normalize_path`, `merge_slashes`, `path_with_escaped_slashes_action`). */
  readonly paths: PathSettings;
}
