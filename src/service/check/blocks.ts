/**
 * Keys an operator blocked by hand (`POST /v1/keys/block`): denied at once, without touching the
 * store, until the block expires. A key is either a `/v1/limit` key (`user:42`) or a descriptor
 * entry `key=value` (`remote_address=203.0.113.7`), which blocks every check carrying that entry.
 *
 * Every block has a scope: one domain (only checks of that domain are denied), or all domains
 * ({@link ALL_DOMAINS}, the default; the only scope `/v1/limit`, which has no domain, looks at).
 * Bounded (at most MAX_BLOCKS). With `--workers N` every change is shared with the other workers
 * through the primary, which also gives a new worker the blocks in force ({@link shareBlocks}).
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkWholeNumber } from '../../options.js';
import { workerLink, type BlockChange } from '../cluster/workers.js';

const MAX_BLOCKS = 10_000;
const MAX_BLOCK_MS = 7 * 24 * 3_600_000;
const MAX_BLOCK_KEY = 1024;
const MAX_DOMAIN = 256;

/** The scope of a block that applies to every domain (and to `/v1/limit`). */
export const ALL_DOMAINS = '*';

/** One block as listed. `domain`: the one domain it applies to, or {@link ALL_DOMAINS}. */
export interface Block {
  readonly key: string;
  readonly domain: string;
  readonly until: number;
}

/** The map key of `key` blocked in `domain` ('\n' cannot be in a domain: see checkDomain). */
const scoped = (domain: string, key: string): string => `${domain}\n${key}`;

/** `domain` as given (absent: all domains), checked. */
export function blockScope(domain: unknown): string {
  if (domain === undefined || domain === null) return ALL_DOMAINS;
  if (typeof domain !== 'string' || domain === '' || domain.length > MAX_DOMAIN || domain.includes('\n')) {
    throw new InvalidOptionError(`domain must be a domain name of 1 to ${MAX_DOMAIN} characters on one line, or "${ALL_DOMAINS}" (or absent) for all domains, got ${describeValue(domain)}`);
  }
  return domain;
}

export class BlockList {
  private readonly until = new Map<string, Block>();
  private readonly listeners: ((change: BlockChange) => void)[] = [];

  /** Hears every block set and lifted through {@link block} and {@link unblock} (not {@link apply}). */
  onChange(listener: (change: BlockChange) => void): void {
    this.listeners.push(listener);
  }

  /** Applies a change made elsewhere (another worker), without telling the listeners. */
  apply(change: BlockChange, now = Date.now()): void {
    const id = scoped(change.domain, change.key);
    if (change.op === 'unblock') this.until.delete(id);
    else if (change.until > now && (this.until.has(id) || this.until.size < MAX_BLOCKS)) this.until.set(id, { key: change.key, domain: change.domain, until: change.until });
  }

  /** Blocks `key` for `ttlMs` in `domain` (default: all domains); refuses a bad duration or a full list. */
  block(key: string, ttlMs: number, now = Date.now(), domain: string = ALL_DOMAINS): number {
    if (typeof key !== 'string' || key === '' || key.length > MAX_BLOCK_KEY) {
      const got = typeof key === 'string' && key !== '' ? `${key.length} characters` : describeValue(key);
      throw new InvalidOptionError(`key must be a non-empty string of at most ${MAX_BLOCK_KEY} characters, got ${got}`);
    }
    checkWholeNumber(ttlMs, { name: 'ttlMs', min: 1, max: MAX_BLOCK_MS, unit: 'ms', meaning: 'one week' });
    const scope = blockScope(domain);
    this.prune(now);
    const id = scoped(scope, key);
    if (!this.until.has(id) && this.until.size >= MAX_BLOCKS) {
      throw new InvalidOptionError(`${this.until.size} keys are blocked already, at most ${MAX_BLOCKS} at once; unblock some or wait for blocks to expire`);
    }
    const expires = now + ttlMs;
    this.until.set(id, { key, domain: scope, until: expires });
    for (const listener of this.listeners) listener({ op: 'block', key, domain: scope, until: expires });
    return expires;
  }

  /** Lifts the block of `key` in `domain` (default: the all-domains one); whether there was one. */
  unblock(key: string, domain: string = ALL_DOMAINS): boolean {
    const lifted = this.until.delete(scoped(domain, key));
    if (lifted) for (const listener of this.listeners) listener({ op: 'unblock', key, domain });
    return lifted;
  }

  /** ms left on `key`'s block for a check of `domain` (all-domains blocks only, when absent), or 0. */
  remaining(key: string, now = Date.now(), domain?: string): number {
    if (this.until.size === 0) return 0;
    const everywhere = this.left(scoped(ALL_DOMAINS, key), now);
    return domain === undefined ? everywhere : Math.max(everywhere, this.left(scoped(domain, key), now));
  }

  private left(id: string, now: number): number {
    const block = this.until.get(id);
    if (block === undefined) return 0;
    if (block.until <= now) {
      this.until.delete(id);
      return 0;
    }
    return block.until - now;
  }

  /** Blocks in force, each with its scope and when it ends (epoch ms). */
  list(now = Date.now()): Block[] {
    this.prune(now);
    return [...this.until.values()];
  }

  get size(): number {
    return this.until.size;
  }

  private prune(now: number): void {
    for (const [id, block] of this.until) if (block.until <= now) this.until.delete(id);
  }
}

/**
 * `--workers N`: shares `blocks` with the other workers (a block or unblock received by one worker
 * applies in all), and asks the primary for the blocks in force (a worker started in place of one
 * that died gets them). Nothing with one process.
 */
export function shareBlocks(blocks: BlockList, workers: number): void {
  const link = workerLink(workers);
  if (link === undefined) return;
  link.onBlockChange((change) => blocks.apply(change));
  blocks.onChange((change) => link.sendBlockChange(change));
  link.askForBlocks();
}
