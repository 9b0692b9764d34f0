/**
 * Rules pushed to every node through Redis. A push stores each domain's YAML in one hash and bumps a
 * version counter in the same transaction, then publishes a notice. Every node subscribed fetches
 * the new version and swaps it in (within a few ms of the notice); a node that starts later loads
 * the current version; a node that missed a notice catches up at its next periodic version check.
 * A push is validated before it is stored, and again by every node: broken rules never replace
 * working ones.
 */
import type { Cluster, Redis } from 'ioredis';
import { InvalidOptionError, describeValue } from '../errors.js';
import { parseRules } from './parse.js';
import { compileRules, type RulesHolder } from './ruleset.js';
import type { DomainConfig } from './types.js';

/** Options of {@link RulesSync}. */
export interface RulesSyncOptions {
  /** The connection to share rules through (a subscriber connection is duplicated from it). */
  readonly redis: Redis | Cluster;
  /** Where pushed rules go into force. */
  readonly holder: RulesHolder;
  /** Prefix of the rules keys and channel. Default `tollgate:`. */
  readonly keyPrefix?: string;
  /** How often (ms) the version is checked in case a notice was missed. Default 1,000. */
  readonly pollIntervalMs?: number;
  /** Called with every refused version (default: `console.error`). */
  readonly onError?: (error: unknown) => void;
  /** Called after each pushed version goes into force. */
  readonly onApply?: (version: number) => void;
}

/** State of the sync, for metrics and health. */
export interface RulesSyncStatus {
  /** The pushed version in force (0: none yet). */
  readonly version: number;
  readonly applied: number;
  readonly refused: number;
  readonly lastError: string | undefined;
}

/** Keeps a node's pushed rules in step with Redis, and pushes new ones. */
export class RulesSync {
  private readonly redis: Redis | Cluster;
  private readonly holder: RulesHolder;
  private readonly rulesKey: string;
  private readonly versionKey: string;
  private readonly channel: string;
  private readonly pollIntervalMs: number;
  private readonly onError: (error: unknown) => void;
  private readonly onApply: ((version: number) => void) | undefined;
  private subscriber: Redis | Cluster | undefined;
  private timer: NodeJS.Timeout | undefined;
  private version = 0;
  private applied = 0;
  private refused = 0;
  private lastError: string | undefined;
  private refusedVersion = -1;
  private syncing: Promise<void> | undefined;

  constructor(options: RulesSyncOptions) {
    if (typeof options !== 'object' || options === null || options.redis === undefined || options.holder === undefined) {
      throw new InvalidOptionError(`RulesSync needs { redis, holder }, got ${describeValue(options)}`);
    }
    const prefix = options.keyPrefix ?? 'tollgate:';
    // One hash tag: both keys live in one Cluster slot, so the push transaction is allowed there.
    this.rulesKey = `${prefix}{rules}:domains`;
    this.versionKey = `${prefix}{rules}:version`;
    this.channel = `${prefix}rules`;
    this.redis = options.redis;
    this.holder = options.holder;
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.onError = options.onError ?? ((error) => console.error(`tollgate: pushed rules refused: ${(error as Error).message}`));
    this.onApply = options.onApply;
  }

  /** Loads the current version, subscribes to notices, and starts the periodic check. */
  async start(): Promise<void> {
    await this.sync();
    const subscriber = this.redis.duplicate();
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', () => void this.sync());
    // The duplicate inherits a disabled offline queue: wait until it is connected to subscribe.
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
   * names is replaced on every node; other domains stay as they are. Rejects with a RulesError,
   * storing nothing, if the YAML is invalid. Resolves with the new version.
   */
  async publish(yaml: string, source = 'pushed rules'): Promise<{ version: number; domains: string[] }> {
    const domains = parseRules(yaml, source);
    compileRules(domains); // every limit must compile, too
    const fields: string[] = [];
    // Each domain keeps the text it came in (the whole push when it held several domains); a node
    // reads back only the domain the field is named after, so later pushes replace domains one by one.
    for (const domain of domains) fields.push(domain.domain, yaml);
    const results = await this.redis.multi().hset(this.rulesKey, ...fields).incr(this.versionKey).exec();
    const failed = results?.find(([error]) => error !== null);
    if (results === null || failed !== undefined) throw failed?.[0] ?? new Error('rules push was aborted');
    const version = Number(results[1]![1]);
    await this.redis.publish(this.channel, String(version));
    await this.sync();
    return { version, domains: domains.map((domain) => domain.domain) };
  }

  status(): RulesSyncStatus {
    return { version: this.version, applied: this.applied, refused: this.refused, lastError: this.lastError };
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    if (this.subscriber !== undefined) this.subscriber.disconnect();
  }

  /** Fetches and applies the version in Redis if it is newer than ours. One at a time. */
  sync(): Promise<void> {
    this.syncing ??= this.fetchAndApply().finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  private async fetchAndApply(): Promise<void> {
    let version: number;
    let stored: Record<string, string>;
    try {
      const results = await this.redis.multi().get(this.versionKey).hgetall(this.rulesKey).exec();
      version = Number(results?.[0]?.[1] ?? 0);
      stored = (results?.[1]?.[1] ?? {}) as Record<string, string>;
    } catch {
      return; // Redis unreachable: keep the rules in force, try again at the next poll
    }
    if (version <= this.version || version === this.refusedVersion) return;
    try {
      const domains: DomainConfig[] = [];
      for (const [name, text] of Object.entries(stored)) {
        const own = parseRules(text, `redis:${this.rulesKey}#${name}`).find((domain) => domain.domain === name);
        if (own === undefined) throw new Error(`the stored rules for domain ${JSON.stringify(name)} do not define it`);
        domains.push(own);
      }
      this.holder.replacePushed(compileRules(domains, Object.values(stored)));
      this.version = version;
      this.applied += 1;
      this.lastError = undefined;
      this.onApply?.(version);
    } catch (error) {
      this.refused += 1;
      this.refusedVersion = version;
      this.lastError = (error as Error).message;
      this.onError(error);
    }
  }
}
