/**
 * File-system events for a rules path that may be swapped under the watcher: a symlink pointed at a
 * new directory (envoy's runtime layout, `rules -> rules-v2/`), or a file replaced by a rename (as
 * editors save). fs.watch follows the path once, to what it is when the watch starts; this module
 * also watches the parent directory, where a swap shows, and aims the watch again at whatever the
 * path now is.
 */
import { watch, statSync, realpathSync, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';

/** Calls `onChange` on events for `path` (followed across swaps); returns what stops watching. */
export function watchPath(path: string, onChange: () => void): () => void {
  const name = basename(path);
  let aimedAt: string | undefined;
  let watcher: FSWatcher | undefined;
  const aim = (): void => {
    const target = identify(path);
    if (target === aimedAt) return;
    aimedAt = target;
    watcher?.close();
    watcher = tryWatch(path, changed);
  };
  const changed = (): void => {
    aim();
    onChange();
  };
  const parent = tryWatch(dirname(path), (filename) => {
    if (filename === null || filename === name) changed();
  });
  aim();
  return () => {
    watcher?.close();
    parent?.close();
  };
}

/** What `path` is now: its real path and inode (undefined when it does not exist). */
function identify(path: string): string | undefined {
  try {
    return `${realpathSync.native(path)} ${statSync(path).ino}`;
  } catch {
    return undefined;
  }
}

function tryWatch(path: string, listener: (filename: string | null) => void): FSWatcher | undefined {
  try {
    const watcher = watch(path, { persistent: false }, (_event, filename) => listener(filename === null ? null : String(filename)));
    watcher.on('error', () => undefined);
    return watcher;
  } catch {
    return undefined; // the poll still catches changes
  }
}
