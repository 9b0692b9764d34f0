/**
 * The Lua sent to Redis, composed once at load time: the batch script (prelude + layout.lua + every
 * algorithm file + codes.lua + decide.lua, one SHA1, so a batch can mix algorithms and a multi-limit check can be
 * atomic), and one lean script per algorithm for a decision alone in its call (prelude + that
 * algorithm's files + codes.lua + single.lua).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AlgorithmName } from '../../algorithms/catalog.js';

/** A script's source and the SHA1 EVALSHA names it by. */
export interface RedisScript {
  readonly source: string;
  readonly sha1: string;
}

function readScript(name: string): string {
  return readFileSync(new URL(`./scripts/${name}`, import.meta.url), 'utf8');
}

function compose(parts: readonly string[]): RedisScript {
  const source = parts.join('\n');
  return { source, sha1: createHash('sha1').update(source).digest('hex') };
}

const section = (name: string): string => `-- ==== ${name} ====\n${readScript(name)}`;

/** The composed decision script and its SHA1. Order matters: helpers first, the driver (which binds KEYS/ARGV) last. */
export const DECIDE_SCRIPT: RedisScript = compose(
  ['prelude.lua', 'layout.lua', 'wide-level.lua', 'level.lua', 'gcra.lua', 'fixed-window.lua', 'sliding-window.lua', 'sliding-window-buckets.lua', 'sliding-log.lua', 'codes.lua', 'decide.lua'].map(section),
);

/**
 * The files each lean script needs besides prelude.lua and single.lua (in dependency order):
 * layout.lua reads and writes the stored state.
 */
const SINGLE_FILES: Partial<Record<AlgorithmName, readonly string[]>> = {
  'fixed-window': ['layout.lua', 'fixed-window.lua'],
  'sliding-window': ['layout.lua', 'sliding-window.lua'],
  'token-bucket': ['layout.lua', 'wide-level.lua', 'level.lua'],
  'leaky-bucket': ['layout.lua', 'wide-level.lua', 'level.lua'],
  gcra: ['layout.lua', 'wide-level.lua', 'level.lua', 'gcra.lua'],
};

/** The lean script deciding one request of `algorithm` alone (scripts/single.lua); none for sliding-log. */
export const SINGLE_SCRIPTS: Partial<Record<AlgorithmName, RedisScript>> = Object.fromEntries(
  Object.entries(SINGLE_FILES).map(([algorithm, files]) => [
    algorithm,
    compose([
      ...['prelude.lua', ...files, 'codes.lua'].map(section),
      `-- ==== single.lua (${algorithm}) ====\nlocal ALGORITHM = ${algorithm.toUpperCase().replaceAll('-', '_')}\n${readScript('single.lua')}`,
    ]),
  ]),
);

/** Every script the store loads on connect. */
export const ALL_SCRIPTS: readonly RedisScript[] = [DECIDE_SCRIPT, ...Object.values(SINGLE_SCRIPTS)];
