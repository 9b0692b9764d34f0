/**
 * Routing and descriptors: the first route whose match takes the request (envoy's order), and the
 * descriptors its rate-limit actions make of the request, with envoy's semantics (an action that
 * cannot produce its entry drops the whole descriptor; `skip_if_absent` drops only the entry).
 */
import { UNKNOWN_IP_KEY, type ClientIp } from '../http/identity/index.js';
import type { DescriptorEntry } from '../rules/match.js';
import type { RateLimitDescriptor } from '../rules/check.js';
import type { RateLimitAction, RateLimitConfig, RouteConfig, RouteMatch } from './config/types.js';
import { allHeadersMatch, type GatewayRequest } from './request.js';

/** The first route that takes `request`, or undefined (the gateway answers 404, as envoy does). */
export function findRoute<R extends RouteConfig>(routes: readonly R[], request: GatewayRequest): R | undefined {
  for (const route of routes) if (routeMatches(route.match, request)) return route;
  return undefined;
}

function routeMatches(match: RouteMatch, request: GatewayRequest): boolean {
  if (match.prefix !== undefined && !(match.caseSensitive ? request.target : request.lowerCaseTarget).startsWith(match.prefix)) return false;
  if (match.path !== undefined && (match.caseSensitive ? request.path : request.path.toLowerCase()) !== match.path) return false;
  if (match.regex !== undefined && !match.regex.test(request.path)) return false;
  if (match.methods !== undefined && !match.methods.includes(request.method)) return false;
  if (match.hosts !== undefined && !match.hosts.some((host) => hostMatches(host, request.host))) return false;
  return allHeadersMatch(match.headers, request);
}

function hostMatches(pattern: string, host: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/** What the actions read besides the request. */
export interface ActionContext {
  readonly sourceCluster: string;
  readonly clientIp: ClientIp;
}

/** The descriptors of `rateLimits` for `request`, in order; the ones an action dropped are left out. */
export function descriptorsOf(rateLimits: readonly RateLimitConfig[], route: RouteConfig, request: GatewayRequest, context: ActionContext): RateLimitDescriptor[] {
  const descriptors: RateLimitDescriptor[] = [];
  for (const rateLimit of rateLimits) {
    const entries = entriesOf(rateLimit.actions, route, request, context);
    if (entries === undefined || entries.length === 0) continue;
    descriptors.push(rateLimit.hitsAddend === undefined ? { entries } : { entries, hitsAddend: rateLimit.hitsAddend });
  }
  return descriptors;
}

/** One descriptor's entries, or undefined when an action cannot produce its own. */
function entriesOf(actions: readonly RateLimitAction[], route: RouteConfig, request: GatewayRequest, context: ActionContext): DescriptorEntry[] | undefined {
  const entries: DescriptorEntry[] = [];
  for (const action of actions) {
    switch (action.type) {
      case 'source_cluster':
        entries.push({ key: 'source_cluster', value: context.sourceCluster });
        break;
      case 'destination_cluster':
        entries.push({ key: 'destination_cluster', value: route.upstream });
        break;
      case 'request_headers': {
        const value = request.header(action.headerName);
        if (value === undefined) {
          if (action.skipIfAbsent) break;
          return undefined;
        }
        entries.push({ key: action.descriptorKey, value });
        break;
      }
      case 'remote_address': {
        // The middleware's key for the client: an IPv6 client is its subnet, whichever of its addresses it uses.
        const key = context.clientIp.key(request.incoming.socket.remoteAddress, (name) => request.header(name));
        if (key === UNKNOWN_IP_KEY) return undefined;
        entries.push({ key: 'remote_address', value: key.slice(3) });
        break;
      }
      case 'masked_remote_address': {
        const network = context.clientIp.masked(request.incoming.socket.remoteAddress, (name) => request.header(name), action.v4PrefixLength, action.v6PrefixLength);
        if (network === undefined) return undefined;
        entries.push({ key: 'masked_remote_address', value: network });
        break;
      }
      case 'generic_key':
        entries.push({ key: action.descriptorKey, value: action.descriptorValue });
        break;
      case 'header_value_match':
        if (allHeadersMatch(action.headers, request) !== action.expectMatch) return undefined;
        entries.push({ key: action.descriptorKey, value: action.descriptorValue });
        break;
    }
  }
  return entries;
}
