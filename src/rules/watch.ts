/**
 * Hot reload from disk: a rules file or directory is watched (fs.watch for a prompt reaction, and a
 * poll as a safety net, since editors replace files and some filesystems drop events). A change is
 * read, validated and compiled off the hot path, then swapped in atomically. A broken file keeps
 * the last good rules: the error is logged, counted, and kept for health checks.
 */
import { watch, type FSWatcher } from 'node:fs';
import { createHash } from 'node:crypto';
import { compileRules, type RulesHolder } from './ruleset.js';
import { readRuleSources } from './files.js';
import { parseRuleSources } from './load.js';
import { oneAtATime } from './serial.js';

/** Options of {@link watchRules}. */
export interface WatchRulesOptions {
  /** How often (ms) the files are re-read in case an event was missed. Default 1,000. */
  readonly pollIntervalMs?: number;
  /** Called with every refused reload (default: `console.error`). */
  readonly onError?: (error: unknown) => void;
  /** Called after each successful swap. */
  readonly onReload?: (version: string) => void;
}

/** Counters and state of a watcher, for metrics and health. */
export interface RulesWatchStatus {
  readonly version: string;
  readonly reloads: number;
  readonly failures: number;
  /** The last refused reload's error, until a good reload clears it. */
  readonly lastError: string | undefined;
}

/** A running watcher. */
export interface RulesWatcher {
  status(): RulesWatchStatus;
  /** Re-reads now (what the watcher does on a change); resolves once done. */
  reload(): Promise<void>;
  close(): void;
}

/** Watches `path` and swaps good rules into `holder`. The holder should already hold `path`'s rules. */
export function watchRules(path: string, holder: RulesHolder, options: WatchRulesOptions = {}): RulesWatcher {
  const reloader = new Reloader(path, holder, options);
  const reload = oneAtATime(() => reloader.reloadOnce());
  const stop = watchAndPoll(path, reload, options.pollIntervalMs ?? 1_000);
  void reload();
  return { status: () => reloader.status(), reload, close: stop };
}

/** Reads the rules at `path` and swaps them in when their content changed and they are valid. */
class Reloader {
  private readonly onError: (error: unknown) => void;
  private lastHash: string | undefined;
  /** The content that last failed: not re-parsed (nor re-counted) until it changes. */
  private lastFailedHash: string | undefined;
  private reloads = 0;
  private failures = 0;
  private lastError: string | undefined;

  constructor(
    private readonly path: string,
    private readonly holder: RulesHolder,
    private readonly options: WatchRulesOptions,
  ) {
    this.onError = options.onError ?? ((error: unknown) => console.error(`tollgate: rules reload refused: ${(error as Error).message}`));
  }

  status(): RulesWatchStatus {
    return { version: this.holder.current.version, reloads: this.reloads, failures: this.failures, lastError: this.lastError };
  }

  async reloadOnce(): Promise<void> {
    try {
      const sources = await readRuleSources(this.path);
      const hash = createHash('sha256');
      for (const { source, text } of sources) hash.update(source).update('\u0000').update(text).update('\u0000');
      const digest = hash.digest('hex');
      if (digest === this.lastHash || digest === this.lastFailedHash) return;
      this.lastFailedHash = digest;
      const rules = compileRules(parseRuleSources(sources), sources.map((s) => s.text));
      this.holder.replace(rules);
      this.lastHash = digest;
      this.lastFailedHash = undefined;
      this.reloads += 1;
      this.lastError = undefined;
      this.options.onReload?.(rules.version);
    } catch (error) {
      this.failures += 1;
      const message = (error as Error).message;
      // Report a broken file once, not on every poll.
      if (message !== this.lastError) this.onError(error);
      this.lastError = message;
    }
  }
}

/** Calls `reload` on file-system events and every `pollIntervalMs`; returns what stops both. */
function watchAndPoll(path: string, reload: () => Promise<void>, pollIntervalMs: number): () => void {
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(path, { persistent: false }, () => void reload());
    watcher.on('error', () => undefined);
  } catch {
    watcher = undefined; // the poll still catches changes
  }
  const timer = setInterval(() => void reload(), pollIntervalMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    watcher?.close();
  };
}
