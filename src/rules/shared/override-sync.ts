/**
 * Per-tenant overrides shared by every node through Redis, the way pushed rules are (stored-sync.ts):
 * one hash field per override (its id → its stored JSON) and a generation, written by
 * compare-and-set, announced, applied by every node within a poll interval at worst (a few ms after
 * the notice), stored again by the nodes holding them when Redis lost them. Each node's holder drops
 * an override at its expiry; the first node to see an expired override stored deletes it from Redis.
 */
import { RulesError } from '../../errors.js';
import { MAX_OVERRIDES, checkOverrides, overrideId, readOverrides, restoredOverride, storedOverride, type ListedOverride, type Override, type OverrideEntry, type OverrideInput } from '../overrides.js';
import type { RulesHolder } from '../ruleset.js';
import { StoredSync, requireFields, type StoredSyncOptions } from './stored-sync.js';
import type { StoredDocuments, StoredKeys } from './stored.js';

/** Options of {@link OverridesSync}. */
export interface OverridesSyncOptions extends StoredSyncOptions {
  /** Where the overrides go into force. */
  readonly holder: RulesHolder;
  /** The clock (epoch ms) expiries are read against. Default: the process clock. */
  readonly clock?: () => number;
}

/** The Redis keys of the overrides, in one Cluster slot. */
export function overrideKeys(prefix: string): StoredKeys {
  return { rules: `${prefix}{overrides}:entries`, generation: `${prefix}{overrides}:version` };
}

/** Keeps a node's overrides in step with Redis, and puts and deletes them for every node. */
export class OverridesSync extends StoredSync {
  private readonly holder: RulesHolder;
  private readonly clock: () => number;
  private readonly pollMs: number;
  /** The stored overrides applied last, to delete each from Redis once it expired. */
  private stored: readonly Override[] = [];
  /** Stored text → the override it was read as: an apply reads again only the texts that changed (reading one costs about 1 ms). */
  private parsed = new Map<string, Override>();
  private expiryTimer: NodeJS.Timeout | undefined;

  constructor(options: OverridesSyncOptions) {
    requireFields(options, ['redis', 'holder'], 'OverridesSync');
    const prefix = options.keyPrefix ?? 'tollgate:';
    const keys = overrideKeys(prefix);
    super(options, { keys, channel: `${prefix}overrides`, what: 'overrides', items: 'overrides', change: 'put', apply: (documents) => this.applyStored(documents) });
    this.holder = options.holder;
    this.clock = options.clock ?? Date.now;
    this.pollMs = options.pollIntervalMs ?? 1_000;
  }

  /** Starts the sync, and the periodic removal from Redis of the overrides expired. */
  override async start(): Promise<void> {
    await super.start();
    this.expiryTimer = setInterval(() => this.removeExpired(), this.pollMs);
    this.expiryTimer.unref();
  }

  override async close(): Promise<void> {
    if (this.expiryTimer !== undefined) clearInterval(this.expiryTimer);
    await super.close();
  }

  /**
   * Puts overrides for every node: YAML or JSON text (readOverrides) or objects. Each is checked
   * against the rules in force here (a known domain, a path some rule matches). Rejects with a
   * RulesError, storing nothing, for any invalid one or past MAX_OVERRIDES in all.
   */
  async putOverride(input: string | OverrideInput | readonly OverrideInput[], source = 'overrides'): Promise<ListedOverride[]> {
    const now = this.clock();
    const overrides = typeof input === 'string' ? readOverrides(input, now, source) : checkOverrides(Array.isArray(input) ? input : [input as OverrideInput], now, source);
    this.holder.checkPlaced(overrides);
    await this.write((documents) => {
      const ids = new Set([...Object.keys(documents), ...overrides.map((override) => override.id)]);
      if (ids.size > MAX_OVERRIDES) throw new RulesError(source, 1, 1, '', `${ids.size} overrides; at most ${MAX_OVERRIDES} are held: delete some first`);
      return Object.fromEntries(overrides.map((override) => [override.id, storedOverride(override)]));
    });
    const held = new Map(this.holder.overrides().map((override) => [override.id, override]));
    return overrides.flatMap((override) => held.get(override.id) ?? []);
  }

  /** The overrides in force on this node. */
  overrides(): ListedOverride[] {
    return this.holder.overrides();
  }

  /** Deletes the override of `domain` at `entries` for every node; false when Redis held none. */
  async deleteOverride(domain: string, entries: readonly OverrideEntry[]): Promise<boolean> {
    const id = overrideId(domain, entries);
    let found = false;
    await this.write((documents) => {
      found = documents[id] !== undefined;
      return found ? { [id]: '' } : {};
    });
    return found;
  }

  /** Deletes every override of `domain` for every node; resolves with how many there were. */
  async deleteOverrides(domain: string): Promise<number> {
    let removed = 0;
    await this.write((documents) => {
      const ids = Object.keys(documents).filter((id) => id.startsWith(`${overrideId(domain, [])}|`));
      removed = ids.length;
      return Object.fromEntries(ids.map((id) => [id, '']));
    });
    return removed;
  }

  /** Puts what Redis holds in force; deletes from Redis the overrides expired by now. */
  private applyStored(documents: StoredDocuments): Map<string, RulesError> {
    const refused = new Map<string, RulesError>();
    const overrides: Override[] = [];
    const parsed = new Map<string, Override>();
    for (const [id, text] of Object.entries(documents)) {
      try {
        const override = this.parsed.get(text) ?? restoredOverride(text, `redis:${this.keys.rules}#${id}`);
        parsed.set(text, override);
        overrides.push(override);
      } catch (error) {
        if (!(error instanceof RulesError)) throw error;
        refused.set(id, error);
      }
    }
    this.parsed = parsed;
    this.stored = overrides;
    this.holder.replaceOverrides(overrides.slice(0, MAX_OVERRIDES));
    this.removeExpired();
    return refused;
  }

  /** Deletes from Redis the stored overrides expired by now (another node may have: then nothing is left to do). */
  private removeExpired(): void {
    const now = this.clock();
    const ids = this.stored.filter((override) => override.expiresAt !== undefined && override.expiresAt <= now).map((override) => override.id);
    if (ids.length === 0) return;
    this.write((documents) => Object.fromEntries(ids.filter((id) => documents[id] !== undefined).map((id) => [id, '']))).catch(() => {
      // Redis away, or other writes kept landing: the next tick tries again.
    });
  }
}
