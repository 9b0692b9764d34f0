/**
 * Hot reload from disk: a rules file or directory is watched (fs.watch for a prompt reaction, and a
 * poll as a safety net, since editors replace files and some filesystems drop events). A change is
 * applied only once the files have settled (the same size and times for `settleMs`), so a file
 * caught half-written is never applied; then it is read, validated and compiled off the hot path,
 * and swapped in atomically. A broken file keeps the last good rules: the error is logged, counted,
 * and kept for health checks until the files validate again or are back to the rules in force.
 */
import { createHash } from 'node:crypto';
import { checkOptions, checkWholeNumbers, type WholeNumberRange } from '../options.js';
import { readRuleSources, rulesSignature, type RulesText } from './files.js';
import { parseRuleSources, type RuleLoadOptions } from './load.js';
import { compileRules, type RulesHolder } from './ruleset.js';
import { oneAtATime } from './one-at-a-time.js';
import type { DomainConfig } from './types.js';
import { watchPath } from './watch-path.js';

/** Options of {@link watchRules}. */
export interface WatchRulesOptions {
  /** How often (ms) the files are checked in case an event was missed. Default 1,000. */
  readonly pollIntervalMs?: number;
  /** How long (ms) the files must stay unchanged (size and times) before a change is applied. Default 500. */
  readonly settleMs?: number;
  /** Called with every refused reload (default: `console.error`). */
  readonly onError?: (error: unknown) => void;
  /** Called when domains leave the rules because their file was removed or no longer defines them (default: `console.warn`). */
  readonly onWarning?: (message: string) => void;
  /** Called after each successful swap. */
  readonly onReload?: (version: string) => void;
  /** envoy's MERGE_DOMAIN_CONFIG: one domain across several files is merged. Default false. */
  readonly mergeDomains?: boolean;
  /** Limits the store cannot keep (rules/load.ts RuleLoadOptions): a reload with one is refused. */
  readonly refuse?: RuleLoadOptions['refuse'];
}

/** Counters and state of a watcher, for metrics and health. */
export interface RulesWatchStatus {
  readonly version: string;
  readonly reloads: number;
  readonly failures: number;
  /** The last refused reload's error, until the files validate again or are back to the rules in force. */
  readonly lastError: string | undefined;
}

/** A running watcher. */
export interface RulesWatcher {
  status(): RulesWatchStatus;
  /**
   * Checks the files now (what the watcher does on a change): when they changed, waits until they
   * have settled, then applies or refuses them. Resolves once done.
   */
  reload(): Promise<void>;
  close(): void;
}

const OPTIONS = ['pollIntervalMs', 'settleMs', 'onError', 'onWarning', 'onReload', 'mergeDomains', 'refuse'];

/** The watcher's whole-number options: their ranges and defaults. */
const WATCH_NUMBERS = {
  pollIntervalMs: { min: 1, unit: 'ms', fallback: 1_000 },
  settleMs: { min: 0, unit: 'ms', fallback: 500 },
} as const satisfies Record<string, WholeNumberRange>;

/** Watches `path` and swaps good rules into `holder`. The holder should already hold `path`'s rules. */
export function watchRules(path: string, holder: RulesHolder, options: WatchRulesOptions = {}): RulesWatcher {
  checkOptions('watchRules', options, OPTIONS, '{ pollIntervalMs: 1000, settleMs: 500 }');
  // `?? undefined`: null has always meant the default here.
  const { pollIntervalMs, settleMs } = checkWholeNumbers(WATCH_NUMBERS, (name) => options[name] ?? undefined, (name) => `watchRules: ${name}`);
  const reloader = new Reloader(path, holder, options, settleMs);
  const reload = oneAtATime(() => reloader.reloadOnce());
  const stopWatching = watchPath(path, () => void reload());
  const timer = setInterval(() => void reload(), pollIntervalMs);
  timer.unref();
  void reload();
  const close = (): void => {
    clearInterval(timer);
    stopWatching();
    reloader.close();
  };
  return { status: () => reloader.status(), reload, close };
}

/** Reads the rules at `path` once they have settled, and swaps them in when their content changed and they are valid. */
class Reloader {
  private readonly onError: (error: unknown) => void;
  private readonly onWarning: (message: string) => void;
  /** The files' signature last handled (applied, refused or found unchanged): not looked at again until it changes. */
  private handled: string | undefined;
  private lastHash: string | undefined;
  /** The content that last failed: not re-parsed (nor re-counted) until it changes. */
  private lastFailedHash: string | undefined;
  /** Domains of the files in force, by file: to say which domains a removed file took with it. */
  private domainsBySource = new Map<string, string[]>();
  private reloads = 0;
  private failures = 0;
  private lastError: string | undefined;
  private closed = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly path: string,
    private readonly holder: RulesHolder,
    private readonly options: WatchRulesOptions,
    private readonly settleMs: number,
  ) {
    this.onError = options.onError ?? ((error: unknown) => console.error(`tollgate: rules reload refused: ${(error as Error).message}`));
    this.onWarning = options.onWarning ?? ((message: string) => console.warn(`tollgate: ${message}`));
  }

  status(): RulesWatchStatus {
    return { version: this.holder.current.version, reloads: this.reloads, failures: this.failures, lastError: this.lastError };
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async reloadOnce(): Promise<void> {
    let signature = await rulesSignature(this.path);
    while (signature !== this.handled && !this.closed) {
      const settled = await this.settle(signature);
      if (settled === undefined) return;
      let sources: RulesText[];
      try {
        sources = await readRuleSources(this.path);
      } catch (error) {
        this.handled = settled;
        this.refuse(error);
        return;
      }
      // Changed while being read: wait for it to settle again.
      signature = await rulesSignature(this.path);
      if (signature !== settled) continue;
      this.handled = settled;
      this.consider(sources);
    }
  }

  /** Resolves with the signature once it has stayed the same for settleMs (undefined when closed meanwhile). */
  private async settle(signature: string): Promise<string | undefined> {
    for (;;) {
      // Not unref'd: a reload someone awaits must end even when nothing else keeps the process up.
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, this.settleMs);
      });
      if (this.closed) return undefined;
      const now = await rulesSignature(this.path);
      if (now === signature) return signature;
      signature = now;
    }
  }

  /** Applies `sources` unless they are the rules in force or the content that last failed. */
  private consider(sources: readonly RulesText[]): void {
    const hash = createHash('sha256');
    for (const { source, text } of sources) hash.update(source).update('\u0000').update(text).update('\u0000');
    const digest = hash.digest('hex');
    if (digest === this.lastHash) {
      // Back to the rules in force (a broken file restored): nothing is wrong any more.
      this.lastFailedHash = undefined;
      this.lastError = undefined;
      return;
    }
    if (digest === this.lastFailedHash) return;
    try {
      const domains = parseRuleSources(sources, { mergeDomains: this.options.mergeDomains === true, refuse: this.options.refuse });
      const rules = compileRules(domains, sources.map((s) => s.text));
      this.holder.replace(rules);
      this.warnRemoved(domains);
      this.lastHash = digest;
      this.lastFailedHash = undefined;
      this.reloads += 1;
      this.lastError = undefined;
      this.options.onReload?.(rules.version);
    } catch (error) {
      this.lastFailedHash = digest;
      this.refuse(error);
    }
  }

  private refuse(error: unknown): void {
    this.failures += 1;
    const message = (error as Error).message;
    // Report a broken file once, not on every poll.
    if (message !== this.lastError) this.onError(error);
    this.lastError = message;
  }

  /** Says which domains left the rules with this reload, and why (their file removed, or no longer defining them). */
  private warnRemoved(domains: readonly DomainConfig[]): void {
    const previous = this.domainsBySource;
    this.domainsBySource = new Map();
    for (const { domain, source } of domains) this.domainsBySource.set(source, [...(this.domainsBySource.get(source) ?? []), domain]);
    const now = new Set(domains.map((config) => config.domain));
    const reasons: string[] = [];
    for (const [source, names] of previous) {
      const gone = names.filter((name) => !now.has(name));
      if (gone.length === 0) continue;
      const list = gone.map((name) => JSON.stringify(name)).join(', ');
      reasons.push(this.domainsBySource.has(source) ? `${source} no longer defines ${list}` : `${source} was removed, and with it ${list}`);
    }
    if (reasons.length > 0) this.onWarning(`rules reloaded without some domains, which no longer limit anything unless pushed: ${reasons.join('; ')}`);
  }
}
