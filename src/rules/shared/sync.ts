/**
 * Rules pushed to every node through Redis. A push stores each domain's YAML in one hash and a new
 * generation in the same script, then publishes a notice; every node applies what Redis holds
 * (stored-sync.ts: notices, periodic checks, restoring what Redis lost). Generations come from
 * Redis's clock and nodes compare content, not counters, so pushes keep working after Redis lost
 * its data. A push is validated as the whole set it produces; a stored document that does not
 * validate is skipped by every node, named, and never blocks the rest.
 */
import { parseRules } from '../parse/index.js';
import type { RulesHolder } from '../ruleset.js';
import { StoredSync, requireFields, type StoredSyncOptions, type StoredSyncStatus } from './stored-sync.js';
import { compileStored, skippedDomains, storedKeys, type SkippedDomain } from './stored.js';

export type { SkippedDomain } from './stored.js';

/** Options of {@link RulesSync}. */
export interface RulesSyncOptions extends StoredSyncOptions {
  /** Where pushed rules go into force. */
  readonly holder: RulesHolder;
}

/** State of the sync, for metrics and health. */
export type RulesSyncStatus = StoredSyncStatus;

/** What a push stored. */
export interface RulesPushResult {
  /** The new generation. */
  readonly version: number;
  /** The domains pushed. */
  readonly domains: string[];
  /** Stored documents (of other domains) that every node skips, and why. */
  readonly skipped: SkippedDomain[];
}

/** Keeps a node's pushed rules in step with Redis, and pushes new ones. */
export class RulesSync extends StoredSync {
  constructor(options: RulesSyncOptions) {
    requireFields(options, ['redis', 'holder'], 'RulesSync');
    const prefix = options?.keyPrefix ?? 'tollgate:';
    const keys = storedKeys(prefix);
    const holder = options?.holder;
    super(options, {
      keys,
      channel: `${prefix}rules`,
      what: 'pushed rules',
      items: 'pushed domains',
      change: 'push',
      apply: (documents) => {
        const { rules, refused } = compileStored(documents, keys, holder.pushedRules());
        holder.replacePushed(rules);
        return refused;
      },
    });
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
    let skipped: SkippedDomain[] = [];
    const version = await this.write((documents) => {
      const { refused } = compileStored({ ...documents, ...pushed }, this.keys);
      for (const domain of domains) if (refused.has(domain)) throw refused.get(domain)!;
      skipped = skippedDomains(refused);
      return pushed;
    });
    return { version, domains, skipped };
  }
}
