/**
 * Rules pushed to every node through Redis. A push stores each domain's YAML in one hash and a new
 * generation in the same script, then publishes a notice. Every node subscribed fetches what Redis
 * holds and, when it differs from what the node runs, applies it (within a few ms of the notice);
 * a node that starts later loads it; a node that missed a notice catches up at its next periodic
 * check. Generations come from Redis's clock and nodes compare content, not counters, so pushes
 * keep working after Redis lost its data; and a node that finds Redis without the generation it
 * runs (lost, or rolled back to an older one) stores its set again, by a compare-and-set that never
 * overwrites a newer push, so nodes started after the loss get it too. A push is validated as the
 * whole set it produces; a stored document that does not validate is skipped by every node, named,
 * and never blocks the rest.
 */
import type { Cluster, Redis } from 'ioredis';
import { InvalidOptionError, StoreError, describeValue } from '../errors.js';
import { parseRules } from './parse/index.js';
import type { RulesHolder } from './ruleset.js';
import { oneAtATime } from './one-at-a-time.js';
import {
  compileStored,
  readStored,
  restoreStored,
  skippedDomains,
  storedDigest,
  storedKeys,
  writeStored,
  type SkippedDomain,
  type StoredDocuments,
  type StoredKeys,
  type StoredState,
} from './stored.js';

export type { SkippedDomain } from './stored.js';

/** Options of {@link RulesSync}. */
export interface RulesSyncOptions {
  /** The connection to share rules through (a subscriber connection is duplicated from it). */
  readonly redis: Redis | Cluster;
  /** Where pushed rules go into force. */
  readonly holder: RulesHolder;
  /** Prefix of the rules keys and channel. Default `tollgate:`. */
  readonly keyPrefix?: string;
  /** How often (ms) Redis is checked in case a notice was missed. Default 1,000. */
  readonly pollIntervalMs?: number;
  /** Called with every stored document refused (default: `console.error`). */
  readonly onError?: (error: unknown) => void;
  /** Called when Redis no longer held the pushed rules this node runs, and it stored them again (default: `console.warn`). */
  readonly onWarning?: (message: string) => void;
  /** Called after each pushed generation goes into force. */
  readonly onApply?: (version: number) => void;
}

/** State of the sync, for metrics and health. */
export interface RulesSyncStatus {
  /** The pushed generation in force (0: none yet). */
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

/** What a push stored. */
export interface RulesPushResult {
  /** The new generation. */
  readonly version: number;
  /** The domains pushed. */
  readonly domains: string[];
  /** Stored documents (of other domains) that every node skips, and why. */
  readonly skipped: SkippedDomain[];
}

/** How often a push is retried when other pushes land between its read and its write. */
const PUSH_ATTEMPTS = 5;

/** Keeps a node's pushed rules in step with Redis, and pushes new ones. */
export class RulesSync {
  private readonly redis: Redis | Cluster;
  private readonly holder: RulesHolder;
  private readonly keys: StoredKeys;
  private readonly channel: string;
  private readonly pollIntervalMs: number;
  private readonly onError: (error: unknown) => void;
  private readonly onWarning: (message: string) => void;
  private readonly onApply: ((version: number) => void) | undefined;
  private subscriber: Redis | Cluster | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Generation and digest of what this node applied last. */
  private appliedId: string | undefined;
  /** The documents this node runs (those it skipped left out): carried over by a push after Redis lost them. */
  private running: StoredDocuments = {};
  private version = 0;
  private applied = 0;
  private refused = 0;
  private skipped: readonly SkippedDomain[] = [];
  private lostWarned = false;
  /** Fetches and applies what Redis holds when it differs from what runs. One at a time. */
  readonly sync: () => Promise<void>;

  constructor(options: RulesSyncOptions) {
    if (typeof options !== 'object' || options === null || options.redis === undefined || options.holder === undefined) {
      throw new InvalidOptionError(`RulesSync needs { redis, holder }, got ${describeValue(options)}`);
    }
    const prefix = options.keyPrefix ?? 'tollgate:';
    this.keys = storedKeys(prefix);
    this.channel = `${prefix}rules`;
    this.redis = options.redis;
    this.holder = options.holder;
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.onError = options.onError ?? ((error) => console.error(`tollgate: pushed rules refused: ${(error as Error).message}`));
    this.onWarning = options.onWarning ?? ((message) => console.warn(`tollgate: ${message}`));
    this.onApply = options.onApply;
    this.sync = oneAtATime(() => this.fetchAndApply());
  }

  /** Loads what Redis holds, subscribes to notices, and starts the periodic check. */
  async start(): Promise<void> {
    await this.sync();
    // With an offline queue: ioredis subscribes again by itself after each reconnection, and
    // without a queue that call can meet a stream not yet writable and reject where nobody waits.
    const redis = this.redis;
    const subscriber = redis.isCluster ? (redis as Cluster).duplicate(undefined, { enableOfflineQueue: true }) : (redis as Redis).duplicate({ enableOfflineQueue: true });
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', () => void this.sync());
    // Subscribed once connected, so a Redis that never answers is told within 5 s.
    if (subscriber.status !== 'ready') {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the rules subscriber could not connect to Redis within 5 s')), 5_000);
        subscriber.once('ready', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    await subscriber.subscribe(this.channel);
    this.timer = setInterval(() => void this.sync(), this.pollIntervalMs);
    this.timer.unref();
  }

  /**
   * Validates `yaml` (one or more `---`-separated domain documents) and pushes it: each domain it
   * names is replaced on every node; other domains stay as they are. The set the push produces
   * (the stored documents with these in place) is compiled as every node will compile it first.
   * Rejects with a RulesError, storing nothing, if the pushed YAML is invalid. Stored documents of
   * other domains that do not validate are reported in `skipped`; they do not block the push.
   * When Redis lost the pushed rules, the documents this node runs are stored again with the push.
   */
  async publish(yaml: string, source = 'pushed rules'): Promise<RulesPushResult> {
    const domains = parseRules(yaml, source).map((domain) => domain.domain);
    const pushed = Object.fromEntries(domains.map((domain) => [domain, yaml]));
    for (let attempt = 0; attempt < PUSH_ATTEMPTS; attempt++) {
      const state = await readStored(this.redis, this.keys);
      const lost = state.generation === undefined;
      const documents = { ...(lost ? this.running : {}), ...state.documents, ...pushed };
      const { refused } = compileStored(documents, this.keys);
      for (const domain of domains) if (refused.has(domain)) throw refused.get(domain)!;
      const version = await writeStored(this.redis, this.keys, state.generation, this.version, lost ? documents : pushed);
      if (version === undefined) continue; // another push landed meanwhile: validate again
      await this.redis.publish(this.channel, String(version));
      await this.sync();
      return { version, domains, skipped: skippedDomains(refused) };
    }
    throw new StoreError(`the rules push gave up after ${PUSH_ATTEMPTS} attempts: other pushes kept landing while it was validated; push again`);
  }

  status(): RulesSyncStatus {
    const lastError = this.skipped.length === 0 ? undefined : this.skipped.map((skipped) => skipped.error).join('\n');
    return { version: this.version, applied: this.applied, refused: this.refused, lastError, skipped: this.skipped };
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    if (this.subscriber !== undefined) this.subscriber.disconnect();
  }

  private async fetchAndApply(): Promise<void> {
    let state = await this.read();
    if (state !== undefined && this.holdsNewer(state)) {
      if (await this.restore(state)) return;
      state = await this.read(); // a push landed meanwhile: apply it
    }
    if (state === undefined) return; // Redis unreachable: keep the rules in force, try again at the next poll
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

  /** This node runs a pushed generation Redis no longer holds: lost (no generation), or an older one. */
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
      await this.redis.publish(this.channel, String(this.version));
    } catch {
      return true; // Redis went away meanwhile: the next poll tries again
    }
    const names = Object.keys(this.running).join(', ');
    const found = state.generation === undefined ? `${this.keys.generation} is gone: flushed, restarted without persistence, or failed over?` : `it held the older generation ${state.generation}`;
    this.onWarning(`Redis held no pushed rules of the generation this node runs (${found}); this node stored again the pushed domains it runs (${names}) at generation ${this.version}`);
    return true;
  }

  /** Puts what Redis holds in force, leaving out (and reporting) the documents that do not validate. */
  private apply(state: StoredState, id: string): void {
    const { rules, refused } = compileStored(state.documents, this.keys, this.holder.pushedRules());
    this.holder.replacePushed(rules);
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

  /** Redis holds no pushed rules while this node runs some it cannot store again (no generation): say so once, and keep them. */
  private warnLost(): void {
    const names = Object.keys(this.running);
    if (this.appliedId === undefined || this.lostWarned || names.length === 0) return;
    this.lostWarned = true;
    this.onWarning(
      `Redis holds no pushed rules (${this.keys.generation} is gone: flushed, restarted without persistence, or failed over?); ` +
        `this node keeps the pushed domains it runs (${names.join(', ')}), and the next push stores them again`,
    );
  }
}
