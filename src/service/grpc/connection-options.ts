/**
 * The gRPC listener's connection limits (docs/operations.md, "gRPC connections"): how long a
 * connection may stay idle or live at all, how long a call's request may take to arrive, and how
 * many calls and connections it may hold. Read with the rest of `serve`'s flags (options.ts);
 * enforced by connection-hygiene.ts.
 */
import { checkDurationText, checkWholeNumberText, checkWholeNumbers, type DurationRange, type WholeNumberRange } from '../../options.js';

/** See {@link ServiceOptions.grpcConnections}; every duration in ms, 0 where it says "off". */
export interface GrpcConnectionLimits {
  /** A connection with no call open this long is closed with GOAWAY (`--grpc-idle-timeout`, 0: never). */
  readonly idleTimeoutMs: number;
  /** A connection this old is sent GOAWAY, whatever it carries (`--grpc-max-connection-age`, 0: never). */
  readonly maxConnectionAgeMs: number;
  /** ... and cut this long after, calls still open or not (`--grpc-max-connection-age-grace`). */
  readonly maxConnectionAgeGraceMs: number;
  /** A call's request (its message and end of stream) must arrive within this, from the call's headers (`--grpc-receive-timeout`). */
  readonly receiveTimeoutMs: number;
  /** Calls open at once on one connection: HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS (`--grpc-max-concurrent-streams`). */
  readonly maxConcurrentStreams: number;
  /** Connections open at once; one more is closed as it is accepted (`--grpc-max-connections`). */
  readonly maxConnections: number;
}

/** The gRPC connection flags and their environment variables. */
export const GRPC_CONNECTION_FLAGS: Readonly<Record<string, string>> = {
  'grpc-idle-timeout': 'TOLLGATE_GRPC_IDLE_TIMEOUT',
  'grpc-max-connection-age': 'TOLLGATE_GRPC_MAX_CONNECTION_AGE',
  'grpc-max-connection-age-grace': 'TOLLGATE_GRPC_MAX_CONNECTION_AGE_GRACE',
  'grpc-receive-timeout': 'TOLLGATE_GRPC_RECEIVE_TIMEOUT',
  'grpc-max-concurrent-streams': 'TOLLGATE_GRPC_MAX_CONCURRENT_STREAMS',
  'grpc-max-connections': 'TOLLGATE_GRPC_MAX_CONNECTIONS',
};

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
/** Longest duration any of these flags takes: a week. */
const MAX_DURATION_MS = 7 * 24 * HOUR_MS;

/**
 * The durations' defaults. The age and its grace are envoyproxy/ratelimit's GRPC_MAX_CONNECTION_AGE
 * (24h) and GRPC_MAX_CONNECTION_AGE_GRACE (1h); the receive timeout is the HTTP listener's request
 * timeout; five idle minutes cost a client one reconnection. A minimum of 0: 0 turns the limit off.
 */
const DURATION_FLAGS = {
  'grpc-idle-timeout': { minMs: 0, maxMs: MAX_DURATION_MS, fallbackMs: 5 * MINUTE_MS },
  'grpc-max-connection-age': { minMs: 0, maxMs: MAX_DURATION_MS, fallbackMs: 24 * HOUR_MS },
  'grpc-max-connection-age-grace': { minMs: 1, maxMs: MAX_DURATION_MS, fallbackMs: HOUR_MS },
  'grpc-receive-timeout': { minMs: 1, maxMs: MAX_DURATION_MS, fallbackMs: 10_000 },
} as const satisfies Record<string, DurationRange>;

/**
 * The counts' defaults: 100 calls per connection is what HTTP/2 (RFC 9113, 6.5.2) asks a peer to
 * allow at least; a client that needs more opens another connection, as Envoy does.
 */
const COUNT_FLAGS = {
  'grpc-max-concurrent-streams': { min: 1, max: 1_000_000, unit: 'calls', fallback: 100 },
  'grpc-max-connections': { min: 1, max: 1_000_000, unit: 'connections', fallback: 10_000 },
} as const satisfies Record<string, WholeNumberRange>;

/** Reads and checks the gRPC connection flags (`value` and `where` as options.ts gives them). */
export function grpcConnectionLimits(value: (flag: string) => string | undefined, where: (flag: string) => string): GrpcConnectionLimits {
  const ms = (flag: keyof typeof DURATION_FLAGS): number => checkDurationText(value(flag), where(flag), DURATION_FLAGS[flag]);
  const counts = checkWholeNumbers<keyof typeof COUNT_FLAGS, string | undefined>(COUNT_FLAGS, value, where, checkWholeNumberText);
  return {
    idleTimeoutMs: ms('grpc-idle-timeout'),
    maxConnectionAgeMs: ms('grpc-max-connection-age'),
    maxConnectionAgeGraceMs: ms('grpc-max-connection-age-grace'),
    receiveTimeoutMs: ms('grpc-receive-timeout'),
    maxConcurrentStreams: counts['grpc-max-concurrent-streams'],
    maxConnections: counts['grpc-max-connections'],
  };
}
