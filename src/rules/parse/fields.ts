/**
 * Reading one YAML document of rules: mappings (with unknown-key checks, aliases and `<<` merge
 * keys followed), lists, and scalar fields (text, flags, whole numbers, choices). Every problem is
 * recorded at the position of the key or value at fault; a reader that finds one returns
 * undefined and reading goes on, so one pass reports every mistake.
 */
import { isAlias, isMap, isScalar, isSeq } from 'yaml';
import type { Node, YAMLMap } from 'yaml';
import { parseDuration } from '../../duration.js';
import { closestMatch } from './suggest.js';
import { RULES_LIMITS, describeNode, offsetOf } from './yaml.js';
import type { Problems, YamlDocument } from './yaml.js';

/** The keys a kind of mapping may have. */
export interface FieldSet {
  /** What the mapping is, for messages: "a descriptor". */
  readonly what: string;
  readonly names: readonly string[];
  /** Keys that belong to another level, with where they go instead. */
  readonly misplaced: Readonly<Record<string, string>>;
}

/** One `name: value` of a mapping. */
export interface Entry {
  readonly name: string;
  /** The key node, for positions. */
  readonly key: Node;
  /** The value with aliases followed; undefined when empty or null (`unit:`, `unit: ~`). */
  readonly value: Node | undefined;
  /** Path of this field in the tree, e.g. `descriptors[0].rate_limit.unit`. */
  readonly path: string;
}

/** One item of a list. */
export interface ListItem {
  /** The item with aliases followed; undefined when empty or null. */
  readonly node: Node | undefined;
  /** The item as written, for positions. */
  readonly raw: Node | null;
  /** Path of the item, e.g. `descriptors[2]`. */
  readonly path: string;
}

/** Freezes a parsed node, leaving out optional fields that are absent (rather than undefined). */
export function freezeNode<T extends object>(node: T): T {
  for (const [name, value] of Object.entries(node)) if (value === undefined) delete (node as Record<string, unknown>)[name];
  return Object.freeze(node);
}

/** Joins a path and a field name: `descriptors[0]` + `key` → `descriptors[0].key`. */
export function joinPath(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

/** Reads one document: follows aliases and records problems. */
export class DocumentReader {
  /** Mappings being merged right now: `a: &a { <<: *a }` must not loop. */
  private readonly merging = new Set<Node>();
  /** Per mapping, known keys already reported (misspelt, or an alias naming no anchor): no "missing" error for those. */
  private readonly reported = new WeakMap<YAMLMap, Set<string>>();

  constructor(
    readonly problems: Problems,
    private readonly yaml: YamlDocument,
  ) {}

  /** Records a problem at `node` (its start). */
  report(node: Node | null | undefined, path: string, problem: string): void {
    this.problems.add(offsetOf(node), path, problem);
  }

  /** Follows aliases; undefined for empty and null values, and for aliases naming no anchor. */
  resolve(node: Node | null | undefined, path: string): Node | undefined {
    let current = node ?? undefined;
    for (let hops = 0; current !== undefined && isAlias(current); hops++) {
      const target = this.yaml.aliasTargets.get(current);
      if (target === undefined || hops > 100) {
        this.report(current, path, `alias *${current.source} names no anchor defined before it; define &${current.source} first`);
        return undefined;
      }
      current = target;
    }
    if (current !== undefined && isScalar(current) && current.value === null) return undefined;
    return current;
  }

  /**
   * The node's plain JSON value (aliases expanded within the document's alias limit): for fields
   * that take free-form data, like a descriptor's `metadata`. Keys become strings.
   */
  toJson(node: Node): unknown {
    return JSON.parse(JSON.stringify(node.toJS(this.yaml.document, { maxAliasCount: RULES_LIMITS.maxAliasCount }) ?? null));
  }

  /** The node as a mapping, or a recorded problem. */
  mapping(node: Node, path: string, expected: string): YAMLMap | undefined {
    if (isMap(node)) return node;
    this.report(node, path, `expected ${expected}, got ${describeNode(node)}`);
    return undefined;
  }

  /** The items of a list, aliases followed (undefined items are empty entries), or a recorded problem. */
  list(node: Node, path: string, expected: string): ListItem[] | undefined {
    if (!isSeq(node)) {
      this.report(node, path, `expected ${expected}, got ${describeNode(node)}`);
      return undefined;
    }
    this.problems.countNodes(node.items.length, offsetOf(node), path);
    return node.items.map((item, index) => {
      const itemPath = `${path}[${index}]`;
      const raw = (item ?? null) as Node | null;
      return { node: this.resolve(raw, itemPath), raw, path: itemPath };
    });
  }

  /**
   * The entries of a mapping by name. Unknown keys are recorded (with a suggestion), `<<` merge
   * keys are expanded (keys written in the mapping win over merged ones).
   */
  entries(map: YAMLMap, path: string, fields: FieldSet): Map<string, Entry> {
    const found = new Map<string, Entry>();
    const mergeSources: Node[] = [];
    this.problems.countNodes(map.items.length, offsetOf(map), path);
    for (const pair of map.items) {
      const key = pair.key as Node | null;
      if (isScalar(key) && typeof key.value === 'symbol') {
        mergeSources.push(...this.mergeSources(pair.value as Node | null, path));
        continue;
      }
      const name = this.keyName(key, path);
      if (name === undefined) continue;
      const entryPath = joinPath(path, name);
      if (!fields.names.includes(name)) {
        this.reportUnknownKey(map, key, entryPath, name, fields);
        continue;
      }
      const value = this.resolve(pair.value as Node | null, entryPath);
      if (value === undefined && isAlias(pair.value)) this.markReported(map, name);
      else found.set(name, { name, key: key!, value, path: entryPath });
    }
    for (const source of mergeSources) {
      if (this.merging.has(source)) {
        this.report(source, path, 'a << merge key includes the mapping it is in; merge another mapping');
        continue;
      }
      this.merging.add(source);
      for (const [name, entry] of this.entries(source as YAMLMap, path, fields)) if (!found.has(name)) found.set(name, entry);
      this.merging.delete(source);
    }
    return found;
  }

  /** True when a problem with field `name` of `map` was already reported (so it is not "missing"). */
  wasReported(map: YAMLMap, name: string): boolean {
    return this.reported.get(map)?.has(name) ?? false;
  }

  private markReported(map: YAMLMap, name: string): void {
    const names = this.reported.get(map) ?? new Set<string>();
    names.add(name);
    this.reported.set(map, names);
  }

  private reportUnknownKey(map: YAMLMap, key: Node | null, path: string, name: string, fields: FieldSet): void {
    const placement = fields.misplaced[name];
    if (placement !== undefined) {
      this.report(key, path, `${JSON.stringify(name)} ${placement}`);
      return;
    }
    const suggestion = closestMatch(name, fields.names);
    if (suggestion === undefined) {
      this.report(key, path, `unknown key ${JSON.stringify(name)}; ${fields.what} has ${fields.names.join(', ')}`);
      return;
    }
    this.report(key, path, `unknown key ${JSON.stringify(name)}; did you mean ${JSON.stringify(suggestion)}?`);
    this.markReported(map, suggestion);
  }

  private keyName(key: Node | null, path: string): string | undefined {
    if (isScalar(key) && key.value !== null && typeof key.value !== 'object') return String(key.source ?? key.value);
    this.report(key, path, `expected a plain key (a name like "key" or "rate_limit"), got ${describeNode(key)}`);
    return undefined;
  }

  /** `<<: *anchor` or `<<: [*a, *b]`: the mappings to merge, first one winning. */
  private mergeSources(value: Node | null, path: string): Node[] {
    const resolved = this.resolve(value, path);
    const candidates = resolved !== undefined && isSeq(resolved) ? resolved.items.map((item) => this.resolve(item as Node, path)) : [resolved];
    const sources: Node[] = [];
    for (const candidate of candidates) {
      if (candidate !== undefined && isMap(candidate)) sources.push(candidate);
      else this.report(candidate ?? value, path, `a << merge key takes a mapping or a list of mappings (usually aliases like *defaults), got ${describeNode(candidate)}`);
    }
    return sources;
  }
}

/** A text field: any scalar, read as written (`value: 200` is "200", as envoy reads it). */
export function readText(reader: DocumentReader, entry: Entry | undefined): string | undefined {
  if (entry?.value === undefined) return undefined;
  const { value } = entry;
  if (isScalar(value)) return String(value.source ?? value.value);
  reader.report(value, entry.path, `${entry.name} must be text, got ${describeNode(value)}`);
  return undefined;
}

/** A true/false field. */
export function readFlag(reader: DocumentReader, entry: Entry | undefined): boolean | undefined {
  if (entry?.value === undefined) return undefined;
  const { value } = entry;
  if (isScalar(value) && typeof value.value === 'boolean') return value.value;
  reader.report(value, entry.path, `${entry.name} must be true or false, got ${describeNode(value)}`);
  return undefined;
}

/** A whole number in `[min, max]`. */
export function readWholeNumber(reader: DocumentReader, entry: Entry | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (entry?.value === undefined) return undefined;
  const { value } = entry;
  const number = isScalar(value) ? value.value : undefined;
  if (typeof number === 'number' && Number.isSafeInteger(number) && number >= min && number <= max) return number;
  const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
  const quoted = isScalar(value) && typeof number === 'string' && /^-?\d+(\.\d+)?$/.test(number.trim()) ? ' (text, not a number: remove the quotes)' : '';
  reader.report(value, entry.path, `${entry.name} must be a whole number ${range}, got ${describeNode(value)}${quoted}`);
  return undefined;
}

/**
 * A duration written with its unit (`10m`, `30s`; a bare number is refused: its unit would be a
 * guess), in whole ms from 1 to `max`.
 */
export function readDuration(reader: DocumentReader, entry: Entry | undefined, max: number): number | undefined {
  if (entry?.value === undefined) return undefined;
  const { value } = entry;
  const written = isScalar(value) ? value.value : undefined;
  const ms = typeof written === 'string' ? parseDuration(written) : `must be a duration with its unit, like 10m or 30s, got ${describeNode(value)}`;
  if (typeof ms === 'number' && ms <= max) return ms;
  reader.report(value, entry.path, typeof ms === 'number' ? `${entry.name} ${written as string} is longer than ${max} ms` : `${entry.name} ${ms}`);
  return undefined;
}

/** One of a fixed set of words, compared after `normalize` (e.g. lowercasing). */
export function readChoice<T extends string>(
  reader: DocumentReader,
  entry: Entry | undefined,
  choices: readonly T[],
  normalize: (text: string) => string = (text) => text,
): T | undefined {
  const text = readText(reader, entry);
  if (text === undefined || entry?.value === undefined) return undefined;
  const choice = choices.find((candidate) => candidate === normalize(text));
  if (choice !== undefined) return choice;
  const suggestion = closestMatch(text, choices);
  const hint = suggestion === undefined ? '' : `; did you mean ${JSON.stringify(suggestion)}?`;
  reader.report(entry.value, entry.path, `${entry.name} ${describeNode(entry.value)} is not one of ${choices.join(', ')}${hint}`);
  return undefined;
}

/**
 * Records that a required field is missing, at the mapping that should hold it (unless a
 * misspelling of it was already reported there).
 */
export function reportMissing(reader: DocumentReader, map: YAMLMap, path: string, name: string, fix: string): void {
  if (reader.wasReported(map, name)) return;
  reader.report(map, joinPath(path, name), `missing ${name}: ${fix}`);
}
