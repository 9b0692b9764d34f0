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
  const onError = options.onError ?? ((error: unknown) => console.error(`tollgate: rules reload refused: ${(error as Error).message}`));
  let lastHash: string | undefined;
  /** The content that last failed: not re-parsed (nor re-counted) until it changes. */
  let lastFailedHash: string | undefined;
  let reloads = 0;
  let failures = 0;
  let lastError: string | undefined;
  let running: Promise<void> | undefined;
  let again = false;

  const reloadOnce = async (): Promise<void> => {
    try {
      const sources = await readRuleSources(path);
      const hash = createHash('sha256');
      for (const { source, text } of sources) hash.update(source).update('\u0000').update(text).update('\u0000');
      const digest = hash.digest('hex');
      if (digest === lastHash || digest === lastFailedHash) return;
      lastFailedHash = digest;
      const rules = compileRules(parseRuleSources(sources), sources.map((s) => s.text));
      holder.replace(rules);
      lastHash = digest;
      lastFailedHash = undefined;
      reloads += 1;
      lastError = undefined;
      options.onReload?.(rules.version);
    } catch (error) {
      failures += 1;
      const message = (error as Error).message;
      // Report a broken file once, not on every poll.
      if (message !== lastError) onError(error);
      lastError = message;
    }
  };

  // One reload at a time; a change during a reload triggers one more.
  const reload = (): Promise<void> => {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = reloadOnce().finally(() => {
      running = undefined;
      if (again) {
        again = false;
        void reload();
      }
    });
    return running;
  };

  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(path, { persistent: false }, () => void reload());
    watcher.on('error', () => undefined);
  } catch {
    watcher = undefined; // the poll still catches changes
  }
  const timer = setInterval(() => void reload(), options.pollIntervalMs ?? 1_000);
  timer.unref();
  void reload();

  return {
    status: () => ({ version: holder.current.version, reloads, failures, lastError }),
    reload,
    close: () => {
      clearInterval(timer);
      watcher?.close();
    },
  };
}
