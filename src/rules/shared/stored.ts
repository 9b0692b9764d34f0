/**
 * Pushed rules as Redis keeps them: a hash with one field per domain (the YAML the domain was pushed
 * in) and a generation number taken from Redis's clock, so it keeps rising even after Redis lost
 * its data (a flush, a restart without persistence, a failover to an empty replica). A node goes by
 * the generation and a digest of the documents: whatever Redis holds, once it differs from what
 * the node runs, is applied. Compiling a stored set skips a broken document, naming it, and keeps
 * the others: one bad domain never blocks the rest.
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { RulesError, TollgateError } from '../../errors.js';
import { parseRules } from '../parse/index.js';
import { compileRules, type RuleSet } from '../ruleset.js';
import type { DomainConfig } from '../types.js';

/** Domain name → the YAML text it is stored with. */
export type StoredDocuments = Readonly<Record<string, string>>;

/** The Redis keys of the pushed rules. One hash tag: both live in one Cluster slot. */
export interface StoredKeys {
  /** The hash of domain documents. */
  readonly rules: string;
  /** The generation of the documents. */
  readonly generation: string;
}

/** What Redis holds. */
export interface StoredState {
  /** The generation as stored; undefined when Redis has none (nothing pushed, or the data was lost). */
  readonly generation: string | undefined;
  readonly documents: StoredDocuments;
}

/** A stored document left out of the rules, and why. */
export interface SkippedDomain {
  readonly domain: string;
  /** `redis:<key>#<domain>:line:col: path: what to fix`. */
  readonly error: string;
}

/** A stored set, compiled: its rules, and the documents refused (by domain). */
export interface CompiledStored {
  readonly rules: RuleSet;
  readonly refused: ReadonlyMap<string, RulesError>;
}

export function storedKeys(prefix: string): StoredKeys {
  return { rules: `${prefix}{rules}:domains`, generation: `${prefix}{rules}:version` };
}

/** Reads the generation and the documents in one transaction. */
export async function readStored(redis: Redis | Cluster, keys: StoredKeys): Promise<StoredState> {
  const results = await redis.multi().get(keys.generation).hgetall(keys.rules).exec();
  const failed = results?.find(([error]) => error !== null);
  if (results === null || failed !== undefined) throw failed?.[0] ?? new Error('reading the pushed rules was aborted');
  const generation = results[0]![1] as string | null;
  return { generation: generation ?? undefined, documents: results[1]![1] as Record<string, string> };
}

// KEYS and ARGV, bound to names; the new generation is Redis's clock in ms, and always above the
// one it replaces and the one the pushing node runs, so generations stay unique and rising even if
// that clock steps back (a failover to a host whose clock is behind).
const WRITE_SCRIPT = `
local documentsKey = KEYS[1]   -- hash: domain -> YAML
local generationKey = KEYS[2]  -- the generation the documents are at
local expected = ARGV[1]       -- the generation the push was validated against ('' for none)
local running = tonumber(ARGV[2]) or 0  -- the generation the pushing node runs (0: none)
-- ARGV[3], ARGV[4], ...: domain, YAML, domain, YAML, ... (an empty text deletes its document)
local current = redis.call('GET', generationKey) or ''
if current ~= expected then return -1 end
for i = 3, #ARGV, 2 do
  if ARGV[i + 1] == '' then redis.call('HDEL', documentsKey, ARGV[i]) else redis.call('HSET', documentsKey, ARGV[i], ARGV[i + 1]) end
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local generation = math.max(now, (tonumber(current) or 0) + 1, running + 1)
redis.call('SET', generationKey, string.format('%d', generation))
return generation
`;

/**
 * Stores `documents` (replacing those domains; an empty text deletes one) and a new generation, unless the generation is no
 * longer `expected` (another push landed since the set was read). `running` is the generation the
 * pushing node runs: the new one is above it. Resolves with the new generation, or undefined on
 * such a conflict.
 */
export async function writeStored(redis: Redis | Cluster, keys: StoredKeys, expected: string | undefined, running: number, documents: StoredDocuments): Promise<number | undefined> {
  const fields = Object.entries(documents).flat();
  const generation = Number(await redis.eval(WRITE_SCRIPT, 2, keys.rules, keys.generation, expected ?? '', String(running), ...fields));
  return generation === -1 ? undefined : generation;
}

// The compare-and-set of a restore: written only where Redis holds no generation or an older one,
// so a push that landed meanwhile (a newer generation) is never overwritten.
const RESTORE_SCRIPT = `
local documentsKey = KEYS[1]   -- hash: domain -> YAML
local generationKey = KEYS[2]  -- the generation the documents are at
local generation = ARGV[1]     -- the generation the restoring node runs
-- ARGV[2], ARGV[3], ...: domain, YAML, domain, YAML, ...
local current = tonumber(redis.call('GET', generationKey))
if current ~= nil and current >= tonumber(generation) then return 0 end
redis.call('DEL', documentsKey)
for i = 2, #ARGV, 2 do redis.call('HSET', documentsKey, ARGV[i], ARGV[i + 1]) end
redis.call('SET', generationKey, generation)
return 1
`;

/**
 * Stores again the whole set a node runs, at the generation it runs, where Redis lost it (no
 * generation) or holds an older one. Resolves true if it wrote, false if Redis holds that
 * generation or a newer one.
 */
export async function restoreStored(redis: Redis | Cluster, keys: StoredKeys, generation: number, documents: StoredDocuments): Promise<boolean> {
  const fields = Object.entries(documents).flat();
  return Number(await redis.eval(RESTORE_SCRIPT, 2, keys.rules, keys.generation, String(generation), ...fields)) === 1;
}

/** A digest of the documents: equal digests, equal rules. */
export function storedDigest(documents: StoredDocuments): string {
  const hash = createHash('sha256');
  for (const name of Object.keys(documents).sort()) hash.update(name).update('\u0000').update(documents[name]!).update('\u0000');
  return hash.digest('hex').slice(0, 16);
}

/**
 * Compiles every stored document on its own. A document that does not validate (written by hand,
 * or by an older version) is refused and left out; where `previous` holds that domain, the
 * previous rules of it stay in force. The rest is applied.
 */
export function compileStored(documents: StoredDocuments, keys: StoredKeys, previous?: RuleSet): CompiledStored {
  const valid: DomainConfig[] = [];
  const texts: string[] = [];
  const refused = new Map<string, RulesError>();
  for (const name of Object.keys(documents).sort()) {
    const source = `redis:${keys.rules}#${name}`;
    try {
      const own = parseRules(documents[name]!, source).find((domain) => domain.domain === name);
      if (own === undefined) throw new RulesError(source, 1, 1, 'domain', `the stored text does not define domain ${JSON.stringify(name)}; push the domain again`);
      compileRules([own]); // a limit that does not compile is this document's problem alone
      valid.push(own);
      texts.push(name, documents[name]!);
    } catch (error) {
      refused.set(name, asRulesError(error, source));
    }
  }
  const rules = compileRules(valid, texts);
  const kept = previous?.only([...refused.keys()]);
  return { rules: kept === undefined || kept.domainNames().length === 0 ? rules : rules.withDomains(kept), refused };
}

function asRulesError(error: unknown, source: string): RulesError {
  if (error instanceof RulesError) return error;
  if (error instanceof TollgateError) return new RulesError(source, 1, 1, '', error.message);
  throw error;
}

/** The refusals, as shown in status and answers. */
export function skippedDomains(refused: ReadonlyMap<string, RulesError>): SkippedDomain[] {
  return [...refused].map(([domain, error]) => ({ domain, error: error.message }));
}
