/**
 * The Lua sent to Redis: prelude + the algorithm files + the driver, composed once at load time
 * into one script (one SHA1) so a batch can mix algorithms and a multi-limit check can be atomic.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** Order matters: helpers first, the driver (which binds KEYS/ARGV) last. */
const SCRIPT_FILES = [
  'prelude.lua',
  'wide-level.lua',
  'level.lua',
  'gcra.lua',
  'fixed-window.lua',
  'sliding-window.lua',
  'sliding-log.lua',
  'decide.lua',
] as const;

function readScript(name: string): string {
  return readFileSync(new URL(`./scripts/${name}`, import.meta.url), 'utf8');
}

/** The composed decision script and its SHA1 (what EVALSHA names). */
export const DECIDE_SCRIPT: { readonly source: string; readonly sha1: string } = (() => {
  const source = SCRIPT_FILES.map((name) => `-- ==== ${name} ====\n${readScript(name)}`).join('\n');
  return { source, sha1: createHash('sha1').update(source).digest('hex') };
})();
