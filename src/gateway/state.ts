/**
 * What the gateway's request handling reads: the routes (with their rate limits split by when they
 * are sent), the upstreams, and the settings a reload swaps together; and what the HTTP side of
 * `on_limit: defer` needs of the deferral (kept to an interface, so the handler does not depend on
 * the workers).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ClientIp } from '../http/identity/index.js';
import type { AnswerSettings } from '../http/verdict.js';
import type { ServiceContext } from '../service/index.js';
import type { RateLimitConfig, RouteConfig } from './config/types.js';
import type { DeferredQueue, TicketStatus } from './defer/index.js';
import type { PathSettings } from './paths.js';
import type { Upstreams } from './proxy.js';
import type { WaitingRoomSettings } from './waiting-room/config.js';
import type { Proceed } from './waiting-room/gate.js';

/** The deferred queues as a defer route's requests and the status URL use them (`GatewayDeferral`). */
export interface DeferralPort {
  readonly logger: Logger;
  /** The queue of a defer route. */
  queue(route: GatewayRoute): DeferredQueue;
  /** Where a ticket stands. */
  status(ticket: string): Promise<TicketStatus>;
}

/** The waiting rooms as the handler uses them (`WaitingRooms`). */
export interface WaitingRoomPort {
  /** Lets the request on (`proceed`, with headers for the answer) or answers it the waiting page. */
  gate(room: WaitingRoomSettings, req: IncomingMessage, res: ServerResponse, proceed: Proceed): void;
}

/** A route with its rate limits split by when they are sent. */
export interface GatewayRoute extends RouteConfig {
  /** Sent before forwarding; they decide the request. */
  readonly beforeLimits: readonly RateLimitConfig[];
  /** Sent once the response is over (envoy's `apply_on_stream_done`); they only count. */
  readonly afterLimits: readonly RateLimitConfig[];
  /** The request headers its `request_headers` actions read (lower-case, no pseudo-headers): each must come at most once. */
  readonly countedHeaders: readonly string[];
}

/** What the handler reads; a reload of the gateway configuration swaps `routes` and `upstreams`. */
export interface GatewayState {
  readonly context: ServiceContext;
  readonly routes: readonly GatewayRoute[];
  /** How request paths are normalised before the routes see them. */
  readonly paths: PathSettings;
  readonly upstreams: Upstreams;
  readonly sourceCluster: string;
  readonly clientIp: ClientIp;
  readonly answer: AnswerSettings;
  /** Present when some route defers: its queues, workers, and the ticket status path. */
  readonly deferral: DeferralPort | undefined;
  /** Present when some route has a waiting room. */
  readonly waitingRooms?: WaitingRoomPort | undefined;
}

/** Splits each route's rate limits into those sent before forwarding and those sent after. */
export function gatewayRoutes(routes: readonly RouteConfig[]): GatewayRoute[] {
  return routes.map((route) => ({
    ...route,
    beforeLimits: route.rateLimits.filter((limit) => !limit.applyOnStreamDone),
    afterLimits: route.rateLimits.filter((limit) => limit.applyOnStreamDone),
    countedHeaders: countedHeaders(route.rateLimits),
  }));
}

function countedHeaders(rateLimits: readonly RateLimitConfig[]): string[] {
  const names = new Set<string>();
  for (const { actions } of rateLimits) {
    for (const action of actions) if (action.type === 'request_headers' && !action.headerName.startsWith(':')) names.add(action.headerName);
  }
  return [...names];
}

