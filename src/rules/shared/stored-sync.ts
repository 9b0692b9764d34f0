/**
 * The machinery of documents shared by every node through Redis (pushed rules, sync.ts; overrides,
 * override-sync.ts): a hash of documents and a generation from Redis's clock, written by a
 * compare-and-set, announced on a channel. Every node subscribed fetches what Redis holds and,
 * when it differs from what the node runs, applies it (within a few ms of the notice); a node that
 * starts later loads it; a node that missed a notice catches up at its next periodic check. A node
 * that finds Redis without the generation it runs (lost, or rolled back to an older one) stores its
 * set again, by a compare-and-set that never overwrites a newer write, so nodes started after the
 * loss get it too. A stored document that does not validate is skipped by every node, named, and
 * never blocks the rest.
 */
import type { Cluster, Redis } from 'ioredis';
import { InvalidOptionError, StoreError, describeValue, type RulesError } from '../../errors.js';
import { oneAtATime } from '../one-at-a-time.js';
import { readStored, restoreStored, skippedDomains, storedDigest, writeStored, type SkippedDomain, type StoredDocuments, type StoredKeys, type StoredState } from './stored.js';

/** What is shared: where Redis keeps it, and how a node puts it in force. */
export interface StoredKind {
  readonly keys: StoredKeys;
  /** The channel notices go on. */
  readonly channel: string;
  /** Names the set in messages (`pushed rules`). */
  readonly what: string;
  /** Names its documents in messages (`pushed domains`). */
  readonly items: string;
  /** Names a write in messages (`push`). */
  readonly change: string;
  /** Compiles what Redis holds and puts it in force: the documents refused, by name. */
  apply(documents: StoredDocuments): ReadonlyMap<string, RulesError>;
}

/** Options every synced set shares. */
export interface StoredSyncOptions {
  /** The connection to share through (a subscriber connection is duplicated from it). */
  readonly redis: Redis | Cluster;
  /** Prefix of the keys and channel. Default `tollgate:`. */
  readonly keyPrefix?: string;
  /** How often (ms) Redis is checked in case a notice was missed. Default 1,000. */
  readonly pollIntervalMs?: number;
  /** Called with every stored document refused (default: `console.error`). */
  readonly onError?: (error: unknown) => void;
  /** Called when Redis no longer held the set this node runs, and it stored it again (default: `console.warn`). */
  readonly onWarning?: (message: string) => void;
  /** Called after each generation goes into force. */
  readonly onApply?: (version: number) => void;
}

/** State of a sync, for metrics and health. */
export interface StoredSyncStatus {
  /** The generation in force (0: none yet). */
  readonly version: number;
  /** Generations applied. */
  readonly applied: number;
  /** Generations applied with at least one stored document refused. */
  readonly refused: number;
  /** The refused documents' messages (one a line), while any stored document is refused. */
  readonly lastError: string | undefined;
  /** The stored documents this node left out of the generation in force, and why. */
  readonly skipped: readonly SkippedDomain[];
}

/** Throws an InvalidOptionError unless `options` is an object with each of `fields`. */
export function requireFields(options: object, fields: readonly string[], what: string): void {
  if (typeof options !== 'object' || options === null || fields.some((field) => (options as Record<string, unknown>)[field] === undefined)) {
    throw new InvalidOptionError(`${what} needs { ${fields.join(', ')} }, got ${describeValue(options)}`);
  }
}

/** How often a write is retried when other writes land between its read and its write. */
const WRITE_ATTEMPTS = 5;

/** Keeps a node's copy of one synced set in step with Redis, and writes changes to it. */
export class StoredSync {
  protected readonly redis: Redis | Cluster;
  protected readonly keys: StoredKeys;
  private readonly kind: StoredKind;
  private readonly pollIntervalMs: number;
  private readonly onError: (error: unknown) => void;
  private readonly onWarning: (message: string) => void;
  private readonly onApply: ((version: number) => void) | undefined;
  private subscriber: Redis | Cluster | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Generation and digest of what this node applied last. */
  private appliedId: string | undefined;
  /** The documents this node runs (those it skipped left out): carried over by a write after Redis lost them. */
  private running: StoredDocuments = {};
  private version = 0;
  private applied = 0;
  private refused = 0;
  private skipped: readonly SkippedDomain[] = [];
  private lostWarned = false;
  /** Fetches and applies what Redis holds when it differs from what runs. One at a time. */
  readonly sync: () => Promise<void>;

  constructor(options: StoredSyncOptions, kind: StoredKind) {
    this.kind = kind;
    this.keys = kind.keys;
    this.redis = options.redis;
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.onError = options.onError ?? ((error) => console.error(`tollgate: ${kind.what} refused: ${(error as Error).message}`));
    this.onWarning = options.onWarning ?? ((message) => console.warn(`tollgate: ${message}`));
    this.onApply = options.onApply;
    this.sync = oneAtATime(() => this.fetchAndApply());
  }

  /** Loads what Redis holds, subscribes to notices, and starts the periodic check. */
  async start(): Promise<void> {
    await this.sync();
    // With an offline queue: without one, a SUBSCRIBE can meet a stream not yet writable and
    // reject where nobody waits. After a reconnection a Cluster's subscriber is subscribed again by
    // ioredis (its ClusterSubscriber handles that command's failure); one server's by us, on
    // `ready`: ioredis's own resubscribe leaves the command's promise without a handler, so a close
    // while it is out (a restart, then a shutdown) was an unhandled rejection ("Connection is closed.").
    const redis = this.redis;
    const subscriber = redis.isCluster ? (redis as Cluster).duplicate(undefined, { enableOfflineQueue: true }) : (redis as Redis).duplicate({ enableOfflineQueue: true, autoResubscribe: false });
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', () => void this.sync());
    // Subscribed once connected, so a Redis that never answers is told within 5 s.
    if (subscriber.status !== 'ready') {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the ${this.kind.what} subscriber could not connect to Redis within 5 s`)), 5_000);
        subscriber.once('ready', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    await subscriber.subscribe(this.kind.channel);
    if (!redis.isCluster) subscriber.on('ready', () => void subscriber.subscribe(this.kind.channel).catch(() => undefined));
    this.timer = setInterval(() => void this.sync(), this.pollIntervalMs);
    this.timer.unref();
  }

  status(): StoredSyncStatus {
    const lastError = this.skipped.length === 0 ? undefined : this.skipped.map((skipped) => skipped.error).join('\n');
    return { version: this.version, applied: this.applied, refused: this.refused, lastError, skipped: this.skipped };
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    if (this.subscriber !== undefined) this.subscriber.disconnect();
  }

  /**
   * Writes `change(documents)` (documents by name; an empty text deletes one) over the set Redis
   * holds (with the set this node runs, where Redis lost it), announces it and applies it here.
   * `change` validates and may throw, storing nothing; it runs again if another write landed
   * meanwhile. Resolves with the new generation.
   */
  protected async write(change: (documents: StoredDocuments) => StoredDocuments): Promise<number> {
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const state = await readStored(this.redis, this.keys);
      const lost = state.generation === undefined;
      const documents = { ...(lost ? this.running : {}), ...state.documents };
      const changed = change(documents);
      if (!lost && Object.keys(changed).length === 0) return this.version; // nothing to change
      const version = await writeStored(this.redis, this.keys, state.generation, this.version, lost ? { ...documents, ...changed } : changed);
      if (version === undefined) continue; // another write landed meanwhile: validate again
      await this.redis.publish(this.kind.channel, String(version));
      await this.sync();
      return version;
    }
    throw new StoreError(`the ${this.kind.what} write gave up after ${WRITE_ATTEMPTS} attempts: other writes kept landing while it was validated; try again`);
  }

  private async fetchAndApply(): Promise<void> {
    let state = await this.read();
    if (state !== undefined && this.holdsNewer(state)) {
      if (await this.restore(state)) return;
      state = await this.read(); // a write landed meanwhile: apply it
    }
    if (state === undefined) return; // Redis unreachable: keep what is in force, try again at the next poll
    if (state.generation === undefined && Object.keys(state.documents).length === 0) {
      this.warnLost();
      return;
    }
    const id = `${state.generation ?? ''}/${storedDigest(state.documents)}`;
    if (id !== this.appliedId) this.apply(state, id);
  }

  private async read(): Promise<StoredState | undefined> {
    try {
      return await readStored(this.redis, this.keys);
    } catch {
      return undefined;
    }
  }

  /** This node runs a generation Redis no longer holds: lost (no generation), or an older one. */
  private holdsNewer(state: StoredState): boolean {
    if (this.version === 0 || Object.keys(this.running).length === 0) return false;
    return state.generation === undefined || Number(state.generation) < this.version;
  }

  /**
   * Stores again the set this node runs, at its generation, unless a newer one landed meanwhile
   * (compare-and-set), and tells the other nodes. True when it stored them.
   */
  private async restore(state: StoredState): Promise<boolean> {
    try {
      if (!(await restoreStored(this.redis, this.keys, this.version, this.running))) return false;
      await this.redis.publish(this.kind.channel, String(this.version));
    } catch {
      return true; // Redis went away meanwhile: the next poll tries again
    }
    const { what, items } = this.kind;
    const names = Object.keys(this.running).join(', ');
    const found = state.generation === undefined ? `${this.keys.generation} is gone: flushed, restarted without persistence, or failed over?` : `it held the older generation ${state.generation}`;
    this.onWarning(`Redis held no ${what} of the generation this node runs (${found}); this node stored again the ${items} it runs (${names}) at generation ${this.version}`);
    return true;
  }

  /** Puts what Redis holds in force, leaving out (and reporting) the documents that do not validate. */
  private apply(state: StoredState, id: string): void {
    const refused = this.kind.apply(state.documents);
    const running: Record<string, string> = {};
    for (const [name, text] of Object.entries(state.documents)) {
      const kept = refused.has(name) ? this.running[name] : text;
      if (kept !== undefined) running[name] = kept;
    }
    this.running = running;
    this.appliedId = id;
    this.version = Number(state.generation ?? 0);
    this.applied += 1;
    this.lostWarned = false;
    this.skipped = skippedDomains(refused);
    if (refused.size > 0) this.refused += 1;
    for (const error of refused.values()) this.onError(error);
    this.onApply?.(this.version);
  }

  /** Redis holds nothing while this node runs a set it cannot store again (no generation): say so once, and keep it. */
  private warnLost(): void {
    const names = Object.keys(this.running);
    if (this.appliedId === undefined || this.lostWarned || names.length === 0) return;
    this.lostWarned = true;
    const { what, items } = this.kind;
    this.onWarning(
      `Redis holds no ${what} (${this.keys.generation} is gone: flushed, restarted without persistence, or failed over?); ` +
        `this node keeps the ${items} it runs (${names.join(', ')}), and the next ${this.kind.change} stores them again`,
    );
  }
}
