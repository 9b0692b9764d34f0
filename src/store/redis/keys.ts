/**
 * Redis key names: `<prefix>{<escaped key>}:<algorithm>:<window ms>`, e.g.
 * `tollgate:{user:42}:tb:1000`. The caller's key is the hash tag, so every key of one identity
 * lands in one Redis Cluster slot; `%`, `{` and `}` in it are percent-escaped, so a key containing
 * braces cannot move the hash tag and two different keys never share a name.
 */
import type { AlgorithmName, CompiledPolicy } from '../../policy.js';

const ALGORITHM_TAGS: Readonly<Record<AlgorithmName, string>> = {
  'token-bucket': 'tb',
  'leaky-bucket': 'lb',
  'fixed-window': 'fw',
  'sliding-log': 'sl',
  'sliding-window': 'sw',
  gcra: 'gcra',
};

const NEEDS_ESCAPE = /[%{}]/;

/** Escapes the characters that would change the key's meaning or hash slot. */
export function escapeKeyPart(key: string): string {
  if (!NEEDS_ESCAPE.test(key)) return key;
  return key.replace(/%/g, '%25').replace(/\{/g, '%7B').replace(/\}/g, '%7D');
}

/** The part after the hash tag, per policy state space: computed once, not per decision. */
export function keySuffix(policy: CompiledPolicy): string {
  return `}:${ALGORITHM_TAGS[policy.algorithm]}:${policy.windowMs}`;
}
