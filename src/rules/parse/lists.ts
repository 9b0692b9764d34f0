/**
 * Reading a domain's `allow:` and `deny:` lists:
 *
 *     allow:
 *       - key: remote_address
 *         values: ['10.0.0.0/8', '::1']
 *     deny:
 *       - key: user_id
 *         values: [mallory]
 *
 * Each item names a descriptor key and its values; a value with a `/` must be a CIDR (an IPv4 or
 * IPv6 address and a prefix length in range), so a mistyped network is an error at its line, not a
 * value that silently never matches.
 */
import { isIP } from 'node:net';
import { freezeNode, readText, reportMissing } from './fields.js';
import type { DocumentReader, Entry, FieldSet } from './fields.js';
import { offsetOf } from './yaml.js';
import type { ListConfig } from '../types.js';

const LIST_ITEM_FIELDS: FieldSet = { what: 'a list entry', names: ['key', 'values'], misplaced: { value: 'is written values: [...] in a list entry (a list of values)' } };

/** Reads `allow:` or `deny:` (absent: undefined; empty: no entries). */
export function readList(reader: DocumentReader, entry: Entry | undefined): readonly ListConfig[] | undefined {
  if (entry?.value === undefined) return undefined;
  const what = `a list of { key, values } (${entry.name}: [{ key: remote_address, values: ['10.0.0.0/8'] }])`;
  const items = reader.list(entry.value, entry.path, what) ?? [];
  const lists: ListConfig[] = [];
  for (const item of items) {
    const map = item.node === undefined ? undefined : reader.mapping(item.node, item.path, what);
    if (map === undefined) {
      if (item.node === undefined) reader.report(item.raw, item.path, `empty ${entry.name} entry: write - key: NAME with values: [...]`);
      continue;
    }
    const fields = reader.entries(map, item.path, LIST_ITEM_FIELDS);
    const key = readText(reader, fields.get('key'));
    if (fields.get('key')?.value === undefined) reportMissing(reader, map, item.path, 'key', 'name the descriptor key the values are of (key: remote_address)');
    else if (key === '') reader.report(fields.get('key')!.value!, `${item.path}.key`, 'key must not be empty');
    const values = readValues(reader, fields.get('values'));
    if (fields.get('values') === undefined) reportMissing(reader, map, item.path, 'values', "list the values (values: ['10.0.0.0/8', 'mallory'])");
    if (key !== undefined && key !== '' && values !== undefined) lists.push(freezeNode({ key, values, location: reader.problems.locate(offsetOf(map)) }));
  }
  return Object.freeze(lists);
}

function readValues(reader: DocumentReader, entry: Entry | undefined): readonly string[] | undefined {
  if (entry?.value === undefined) return entry === undefined ? undefined : Object.freeze([]);
  const items = reader.list(entry.value, entry.path, "a list of values (values: ['10.0.0.0/8', '::1'])");
  if (items === undefined) return undefined;
  const values: string[] = [];
  let valid = true;
  for (const item of items) {
    const text = item.node === undefined ? undefined : readText(reader, { name: 'a value', key: item.node, value: item.node, path: item.path });
    const problem = text === undefined ? 'empty value: write the value, or remove the line' : valueProblem(text);
    if (problem !== undefined) {
      if (text !== undefined || item.node === undefined) reader.report(item.node ?? item.raw, item.path, problem);
      valid = false;
    } else values.push(text!);
  }
  return valid ? Object.freeze(values) : undefined;
}

/** Why `text` cannot be a list value: empty, or a `/` that does not make a CIDR. */
function valueProblem(text: string): string | undefined {
  if (text === '') return 'empty value: write the value, or remove the line';
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const address = text.slice(0, slash);
  const family = isIP(address);
  const bits = family === 4 ? 32 : 128;
  const prefix = text.slice(slash + 1);
  if (family === 0) return `${JSON.stringify(text)} is not a CIDR: ${JSON.stringify(address)} is not an IPv4 or IPv6 address (write 10.0.0.0/8 or 2001:db8::/32)`;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits) return `${JSON.stringify(text)} is not a CIDR: the prefix length must be a whole number from 0 to ${bits} for an IPv${family} address`;
  return undefined;
}
