/**
 * List shapes the gateway configuration repeats: a list of mappings (routes, rate limits,
 * header matchers), and a word or a list of words (methods, hosts) each checked by a pattern.
 */
import { isSeq, type YAMLMap } from 'yaml';
import { readText, type DocumentReader, type Entry } from '../../rules/parse/fields.js';

/** Reads each mapping of the list in `entry` with `read`, keeping what it returns (absent entry: none). */
export function readMappings<T>(reader: DocumentReader, entry: Entry | undefined, expected: { list: string; item: string }, read: (map: YAMLMap, path: string) => T | undefined): T[] {
  if (entry?.value === undefined) return [];
  const results: T[] = [];
  for (const item of reader.list(entry.value, entry.path, expected.list) ?? []) {
    if (item.node === undefined) continue;
    const map = reader.mapping(item.node, item.path, expected.item);
    const result = map === undefined ? undefined : read(map, item.path);
    if (result !== undefined) results.push(result);
  }
  return results;
}

/**
 * `entry` as one word or a list of words, each passed through `normalize` and kept when `valid`
 * (else `problem` is reported at it). Undefined when the entry is absent.
 */
export function readWords(reader: DocumentReader, entry: Entry | undefined, rule: { list: string; valid: RegExp; problem: (word: string) => string; normalize?: (word: string) => string }): string[] | undefined {
  if (entry?.value === undefined) return undefined;
  const items = isSeq(entry.value) ? (reader.list(entry.value, entry.path, rule.list) ?? []).map((item) => ({ ...entry, value: item.node, path: item.path })) : [entry];
  const words: string[] = [];
  for (const item of items) {
    const text = readText(reader, item);
    if (text === undefined) continue;
    const word = rule.normalize?.(text) ?? text;
    if (rule.valid.test(word)) words.push(word);
    else reader.report(item.value, item.path, rule.problem(word));
  }
  return words;
}
