/**
 * The Lua sent to Redis, composed once at load time: the batch script (prelude + layout.lua + every
 * algorithm file + codes.lua + shared-keys.lua + penalty.lua + decide.lua, one SHA1, so a batch can mix algorithms and a multi-limit check can be
 * atomic), and one lean script per algorithm for a decision alone in its call (prelude + that
 * algorithm's files + codes.lua + single.lua).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { algorithmTable, type AlgorithmName } from '../../algorithms/catalog.js';

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
  ['prelude.lua', 'layout.lua', 'wide-level.lua', 'level.lua', 'gcra.lua', 'fixed-window.lua', 'sliding-window.lua', 'sliding-window-buckets.lua', 'sliding-log.lua', 'codes.lua', 'shared-keys.lua', 'penalty.lua', 'decide.lua'].map(section),
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

/** The line of single.lua after which its statements run on every call (the lines before it, once per library load). */
const PER_CALL = '\n-- PER_CALL\n';

/** A Redis Functions library: its name, its source for FUNCTION LOAD, and the function of each algorithm. */
export interface FunctionLibrary {
  readonly name: string;
  readonly source: string;
  readonly functions: Readonly<Partial<Record<AlgorithmName, string>>>;
}

/**
 * The lean scripts as one Redis Functions library (FUNCTION LOAD once, FCALL per decision): the
 * same files, but their `local function`s are created once per library load instead of on every
 * EVALSHA. Redis 7.0 lets a library's load step reach no global but `redis` (not `math`, `string`
 * or `tonumber`), so the files are wrapped in `build()`, run at the first call, which returns the
 * single.lua driver with ALGORITHM as a parameter (single.lua's lines before `-- PER_CALL`
 * run inside `build()`, once). Its name carries its source's hash, so two
 * versions of Tollgate on one Redis (a rolling upgrade) each call their own.
 */
export const LEAN_LIBRARY: FunctionLibrary = (() => {
  const codes = algorithmTable('code');
  // single.lua's helpers and its reused policy table are made once per load; the rest runs per call.
  const [once, perCall] = readScript('single.lua').split(PER_CALL);
  if (perCall === undefined) throw new Error(`single.lua has no ${PER_CALL.trim()} line`);
  const files = ['prelude.lua', 'layout.lua', 'wide-level.lua', 'level.lua', 'gcra.lua', 'fixed-window.lua', 'sliding-window.lua', 'codes.lua'];
  const body = [
    'local single',
    'local function build()',
    ...files.map(section),
    `-- ==== single.lua ====\n${once}\nreturn function(ALGORITHM, KEYS, ARGV)\n${perCall}\nend`,
    'end',
  ].join('\n');
  const name = `tollgate_${createHash('sha1').update(body).digest('hex').slice(0, 12)}`;
  const functions: Partial<Record<AlgorithmName, string>> = {};
  const registrations = (Object.keys(SINGLE_FILES) as AlgorithmName[]).map((algorithm) => {
    const functionName = `${name}_${algorithm.replaceAll('-', '_')}`;
    functions[algorithm] = functionName;
    return `redis.register_function('${functionName}', function(keys, args)\n  single = single or build()\n  return single(${codes[algorithm]}, keys, args)\nend)`;
  });
  return { name, source: [`#!lua name=${name}`, body, ...registrations].join('\n'), functions };
})();

/** Fair shares (scripts/fair-share.lua): one group's decision, on its hash alone. */
export const FAIR_SHARE_SCRIPT: RedisScript = compose(['prelude.lua', 'codes.lua', 'fair-share.lua'].map(section));

/** Every script the store loads on connect. */
export const ALL_SCRIPTS: readonly RedisScript[] = [DECIDE_SCRIPT, ...Object.values(SINGLE_SCRIPTS), FAIR_SHARE_SCRIPT];

/**
 * Reserve then settle (scripts/reservation.lua over adjust.lua): one script per algorithm that takes
 * reservations, composed of only its files (as the lean scripts: every EVALSHA re-creates each local
 * function of its script), both calls in it, a key's state and its reservation in one slot.
 */
export const RESERVATION_SCRIPTS: Partial<Record<AlgorithmName, RedisScript>> = Object.fromEntries(
  Object.entries({
    ...SINGLE_FILES,
    // Every precision (sliding-window-buckets.lua for N > 1), and the sliding log.
    'sliding-window': ['layout.lua', 'sliding-window.lua', 'sliding-window-buckets.lua'],
    'sliding-log': ['layout.lua', 'sliding-log.lua'],
  }).map(([algorithm, files]) => [algorithm, compose(['prelude.lua', ...files, 'codes.lua', 'penalty.lua', 'adjust.lua', 'reservation.lua'].map(section))]),
);

/** A usage ledger's write (scripts/ledger.lua, redis/ledger.ts): apart from the decision scripts, whose SHA1s it leaves alone. */
export const LEDGER_SCRIPT: RedisScript = compose([section('ledger.lua')]);
