/**
 * What the middleware sees of a request, whatever the framework: a {@link RequestView}. The client
 * IP is computed on first use, and the header getter is made only when something asks for it (the
 * default IP key without trusted proxies never does).
 */
import type { ClientIp, HeaderGetter } from './identity/index.js';

/** What the middleware sees of a request, whatever the framework. */
export interface RequestView {
  readonly method: string;
  /** The request target's path, still percent-encoded, without the query. */
  readonly path: string;
  /** The socket peer's address. */
  readonly remoteAddress: string | undefined;
  /** A header by lower-case name; repeated headers joined with `, `. */
  header(name: string): string | undefined;
  /** The client's address key as the middleware's trusted-proxy settings see it (`ip:1.2.3.4`, `ip:2001:db8::/56`). */
  readonly ipKey: string;
  /** The client's address (IPv6 reduced to its configured subnet), for rule descriptors. */
  readonly ip: string;
}

/** How a view finds the client IP: the middleware's resolver, and whether it reads headers at all. */
export interface ClientIpSettings {
  readonly clientIp: ClientIp;
  /** Whether the client IP depends on headers (trusted proxies): if not, views skip the header getter. */
  readonly ipReadsHeaders: boolean;
}

/** For a client IP that ignores headers: no per-request closure. */
const NO_HEADERS: HeaderGetter = () => undefined;

/** The parts every view shares; adapters supply the method, path and header reads. */
export abstract class LazyRequestView implements RequestView {
  private cachedIpKey: string | undefined;
  private cachedHeader: HeaderGetter | undefined;

  constructor(
    private readonly settings: ClientIpSettings,
    readonly remoteAddress: string | undefined,
  ) {}

  abstract readonly method: string;
  abstract readonly path: string;
  protected abstract readHeader(name: string): string | undefined;

  get header(): HeaderGetter {
    return (this.cachedHeader ??= (name) => this.readHeader(name));
  }

  get ipKey(): string {
    return (this.cachedIpKey ??= this.settings.clientIp.key(this.remoteAddress, this.settings.ipReadsHeaders ? this.header : NO_HEADERS));
  }

  get ip(): string {
    return this.ipKey.slice(3);
  }
}

/** What a {@link NodeRequestView} reads of node's request (an `IncomingMessage`, or Fastify's `request.raw`). */
export interface NodeRequestLike {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly socket?: { readonly remoteAddress?: string | undefined } | null | undefined;
}

/**
 * A {@link RequestView} over node's request (node:http, Express, Fastify). The request line and
 * headers are read only when asked for: on Express's requests (whose prototype it swaps) every
 * property read costs V8 a runtime lookup, and the default IP key needs only the socket address.
 */
export class NodeRequestView extends LazyRequestView {
  constructor(
    settings: ClientIpSettings,
    private readonly request: NodeRequestLike,
  ) {
    super(settings, request.socket?.remoteAddress);
  }

  get method(): string {
    return this.request.method ?? 'GET';
  }

  get path(): string {
    const url = this.request.url ?? '/';
    const query = url.indexOf('?');
    return query === -1 ? url : url.slice(0, query);
  }

  protected readHeader(name: string): string | undefined {
    const value = this.request.headers[name];
    return Array.isArray(value) ? value.join(', ') : value;
  }
}
