/**
 * envoy's matching, on the compiled tree: each descriptor walks from the domain root, one entry at
 * a time, taking the child with the exact (key, value) first, then the first wildcard value that
 * matches, then the key-only default. The limit of the node reached by the last entry applies; a
 * walk that runs out of tree before the last entry, or ends on a node without a limit, applies
 * none. One map lookup per entry, whatever the number of rules.
 */
import { createHash } from 'node:crypto';
import type { CompiledRule, CounterText, RuleNode } from './ruleset.js';

/** One (key, value) pair of a descriptor. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** The limit a descriptor reached, and the counter it counts in. */
export interface Match {
  readonly rule: CompiledRule;
  /** Identifies the counter: the domain and the matched path, with the request's values. */
  readonly counterKey: string;
}

/** Longest counter key kept readable; longer ones are hashed (keys are capped at 1 KiB). */
const READABLE_KEY_LENGTH = 256;

/** Finds the limit for one descriptor, or undefined. */
export function matchDescriptor(root: RuleNode, domain: string, entries: readonly DescriptorEntry[]): Match | undefined {
  const reached = walkDescriptor(root, domain, entries);
  // What the walk reached is the match itself (its rule read as the walk ended): no second object.
  return reached?.rule === undefined ? undefined : (reached as Match);
}

/** Where a descriptor's walk ended: the node, its rule then, and the counter key. */
export interface Reached {
  readonly node: RuleNode;
  readonly rule: CompiledRule | undefined;
  readonly counterKey: string;
}

/** The node the descriptor's last entry reaches, and its counter key; undefined when the walk runs out of tree. */
export function walkDescriptor(root: RuleNode, domain: string, entries: readonly DescriptorEntry[]): Reached | undefined {
  if (entries.length === 0) return undefined;
  let node = root;
  let counterKey = '';
  for (let i = 0; i < entries.length; i++) {
    const { key, value } = entries[i]!;
    let next = node.exact.get(key)?.get(value);
    let counted = value;
    if (next === undefined) {
      const wildcards = node.wildcards.get(key);
      if (wildcards !== undefined) {
        for (const wildcard of wildcards) {
          if (wildcard.pattern.test(value)) {
            next = wildcard.node;
            // share_threshold: every value matching the pattern counts in one counter.
            if (wildcard.shareThreshold) counted = wildcard.written;
            break;
          }
        }
      }
    }
    next ??= node.keyOnly.get(key);
    if (next === undefined) return undefined;
    const text = counterTextOf(next, domain, key);
    counterKey = i === 0 ? text.first + escapePart(counted) : counterKey + text.part + escapePart(counted);
    if (i === entries.length - 1) return { node: next, rule: next.rule, counterKey: shorten(counterKey) };
    if (!next.hasChildren) return undefined;
    node = next;
  }
  return undefined;
}

/**
 * The text `node` adds to a counter key before its value (`|key=`, and with the domain before it
 * for a first entry), made once per node rather than per request: a child sits under one key and
 * its tree under one domain (checked: made again otherwise).
 */
function counterTextOf(node: RuleNode, domain: string, key: string): CounterText {
  const text = node.counterText;
  if (text !== undefined && text.key === key && text.domain === domain) return text;
  const part = `|${escapePart(key)}=`;
  return (node.counterText = { key, domain, part, first: escapePart(domain) + part });
}

/**
 * The counter of a descriptor that carries its own limit (envoy's RateLimitOverride): the domain
 * and every entry as sent, then `|=` and the override's unit, which no entry can produce (`=` is
 * escaped in entries), so it never shares a counter with a rule's.
 */
export function overrideCounterKey(domain: string, entries: readonly DescriptorEntry[], unit: string): string {
  let counterKey = escapePart(domain);
  for (const { key, value } of entries) counterKey += `|${escapePart(key)}=${escapePart(value)}`;
  return shorten(`${counterKey}|=${unit}`);
}

/** Makes `|` and `=` unambiguous separators: two different descriptors never share a counter. */
function escapePart(part: string): string {
  return /[%|=]/.test(part) ? part.replace(/%/g, '%25').replace(/\|/g, '%7C').replace(/=/g, '%3D') : part;
}

function shorten(counterKey: string): string {
  if (counterKey.length <= READABLE_KEY_LENGTH) return counterKey;
  return `${counterKey.slice(0, 64)}#${createHash('sha256').update(counterKey).digest('base64url')}`;
}
