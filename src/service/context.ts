/**
 * What the service's parts share: the limiter, the rules, the store, the settings, a logger, and an
 * event stream of decisions that metrics and the dashboard listen to (handlers never call them).
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Limiter } from '../rules/create-limiter.js';
import type { CheckResult } from '../rules/check.js';
import type { RulesHolder } from '../rules/ruleset.js';
import type { RulesSync } from '../rules/shared/sync.js';
import type { OverridesSync } from '../rules/shared/override-sync.js';
import type { RulesWatcher } from '../rules/watch.js';
import type { SettlementStatus, Store } from '../store/types.js';
import type { AuditLog } from './admin/audit.js';
import type { BlockList } from './check/blocks.js';
import type { ServiceOptions } from './options.js';
import type { ReadinessReport } from './health/readiness.js';

/** One answered check (HTTP /json, /v1/check or gRPC, the gateway, or one key's decision at /v1/limit). */
export interface CheckEvent {
  readonly domain: string;
  readonly result: CheckResult;
  /** Counter key per status (absent where no limit applied), for "most throttled keys". */
  readonly keys: readonly (string | undefined)[];
  /**
   * How the check arrived (`gateway`: a request `tollgate gateway` decided before proxying it;
   * `limit`: `POST /v1/limit`, one key and a policy, no domain or rules).
   */
  readonly via: 'json' | 'check' | 'grpc' | 'gateway' | 'limit';
  /** Time spent deciding, in ms. */
  readonly durationMs: number;
}

/** A request refused as malformed (400 / INVALID_ARGUMENT). */
export interface RejectedEvent {
  readonly via: 'http' | 'grpc';
  readonly reason: string;
}

/** A decision that failed on the store. */
export interface StoreErrorEvent {
  readonly kind: string;
}

/** One answered `POST /v1/acquire` (a slot granted or refused) or `POST /v1/release` (check/acquire.ts). */
export interface SlotEvent {
  readonly op: 'acquire' | 'release';
  /** Acquire: whether granted; release: whether a held slot was freed. */
  readonly allowed: boolean;
  /** Slots of the key held after the call, as the store answered (0 when a failure mode answered). */
  readonly held: number;
  readonly key: string;
  readonly degraded?: string;
}

/** One answered `POST /v1/settle` (check/reserve.ts): what it did on each limit it found. */
export interface SettleEvent {
  /** The rules' domain, or `(v1/limit)` for the key form. */
  readonly domain: string;
  /** One per limit: its rule path (`(v1/limit)` for the key form) and what the settle did. */
  readonly limits: readonly { readonly rule: string; readonly status: SettlementStatus }[];
}

export interface ServiceEvents {
  check: [CheckEvent];
  slot: [SlotEvent];
  settle: [SettleEvent];
  rejected: [RejectedEvent];
  storeError: [StoreErrorEvent];
  /** Readiness may have changed (the store connection came up or went down, draining began). */
  readiness: [];
}

export interface ServiceContext {
  readonly options: ServiceOptions;
  readonly logger: Logger;
  readonly limiter: Limiter;
  readonly store: Store;
  readonly holder: RulesHolder;
  readonly watcher: RulesWatcher | undefined;
  readonly sync: RulesSync | undefined;
  /** Per-tenant overrides shared through Redis (with a Redis store only; else the holder keeps them). */
  readonly overrides?: OverridesSync | undefined;
  readonly events: EventEmitter<ServiceEvents>;
  /** Keys blocked by an operator. */
  readonly blocks: BlockList;
  /** One line per admin action and failed admin authentication (audit.ts). */
  readonly audit: AuditLog;
  readonly startedAt: number;
  /** The service's clock (epoch ms) for answers no store decided (blocked keys); decisions carry their own instant. */
  readonly clock: () => number;
  /** Extra parts of the dashboard's snapshot an embedder adds (the gateway's waiting rooms): name → its current value. */
  readonly panels?: Map<string, () => unknown>;
  /** Draining after SIGTERM: still serving as usual, but not ready. */
  readonly lifecycle: { readonly draining: boolean; readonly drainingSince: number | undefined };
  /** Whether the store answers and the service is not draining (with details for /readyz); live state, no I/O. */
  readiness(): Promise<ReadinessReport>;
}
