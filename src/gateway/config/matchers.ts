/**
 * Reading envoy's header matchers (`headers:` of a route's match and of `header_value_match`):
 * `name` plus one comparison, in envoy's current form (`string_match: { exact: ... }`), its older
 * one (`exact_match: ...`) or the short one (`exact: ...`). Problems are recorded at file:line:col.
 */
import { isMap, isScalar, type Node, type YAMLMap } from 'yaml';
import { readFlag, readText, reportMissing, type DocumentReader, type Entry, type FieldSet } from '../../rules/parse/fields.js';
import { readMappings } from './lists.js';
import type { HeaderMatchKind, HeaderMatcher } from './types.js';

/** Each spelling of a comparison → what it is. */
const COMPARISONS: Readonly<Record<string, HeaderMatchKind>> = {
  exact: 'exact',
  prefix: 'prefix',
  suffix: 'suffix',
  contains: 'contains',
  safe_regex: 'safe_regex',
  present: 'present',
  exact_match: 'exact',
  prefix_match: 'prefix',
  suffix_match: 'suffix',
  contains_match: 'contains',
  safe_regex_match: 'safe_regex',
  present_match: 'present',
};

const MATCHER_FIELDS: FieldSet = {
  what: 'a header matcher',
  names: ['name', 'string_match', 'invert_match', 'ignore_case', ...Object.keys(COMPARISONS)],
  misplaced: {},
};

const STRING_MATCH_FIELDS: FieldSet = {
  what: 'a string_match',
  names: ['exact', 'prefix', 'suffix', 'contains', 'safe_regex', 'ignore_case'],
  misplaced: {},
};

const REGEX_FIELDS: FieldSet = { what: 'a regex matcher', names: ['regex', 'google_re2'], misplaced: {} };

/** The longest regex accepted: a pattern is a config value, not a program. */
const MAX_REGEX_LENGTH = 1_024;

/** A header name: an RFC 9110 token, or one of the pseudo-headers envoy matches on. */
const HEADER_NAME = /^(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|:path|:method|:authority|:scheme)$/;

/** Reads a list of header matchers (`headers:`); an absent entry is no matcher. */
export function readHeaderMatchers(reader: DocumentReader, entry: Entry | undefined): HeaderMatcher[] {
  const expected = { list: 'a list of header matchers (- name: x-tier, exact: gold)', item: 'a header matcher (name: x-tier, exact: gold)' };
  return readMappings(reader, entry, expected, (map, path) => readHeaderMatcher(reader, map, path));
}

/** A header name as written: lower-cased, checked. */
export function readHeaderName(reader: DocumentReader, entry: Entry | undefined): string | undefined {
  const name = readText(reader, entry);
  if (name === undefined || entry?.value === undefined) return undefined;
  if (HEADER_NAME.test(name)) return name.toLowerCase();
  reader.report(entry.value, entry.path, `${JSON.stringify(name)} is not a header name: write a name like x-user-id, or one of the pseudo-headers :path, :method, :authority, :scheme`);
  return undefined;
}

function readHeaderMatcher(reader: DocumentReader, map: YAMLMap, path: string): HeaderMatcher | undefined {
  const fields = reader.entries(map, path, MATCHER_FIELDS);
  const name = readHeaderName(reader, fields.get('name'));
  if (!fields.has('name')) reportMissing(reader, map, path, 'name', 'give the header to match, e.g. name: x-tier');
  const comparisons = [...fields.values()].filter((entry) => entry.name in COMPARISONS || entry.name === 'string_match');
  if (comparisons.length > 1) {
    reader.report(comparisons[1]!.key, comparisons[1]!.path, `a header matcher takes one comparison; ${comparisons.map((entry) => entry.name).join(' and ')} are both given`);
    return undefined;
  }
  const invert = readFlag(reader, fields.get('invert_match')) ?? false;
  const ignoreCase = readFlag(reader, fields.get('ignore_case')) ?? false;
  if (name === undefined) return undefined;
  const comparison = comparisons[0];
  // envoy: a matcher with no comparison matches when the header is present.
  if (comparison === undefined) return { name, kind: 'present', present: true, ignoreCase, invert };
  if (comparison.name === 'string_match') return readStringMatch(reader, comparison, name, invert);
  return readComparison(reader, comparison, COMPARISONS[comparison.name]!, { name, ignoreCase, invert });
}

/** envoy's `string_match: { exact | prefix | suffix | contains | safe_regex, ignore_case }`. */
function readStringMatch(reader: DocumentReader, entry: Entry, name: string, invert: boolean): HeaderMatcher | undefined {
  if (entry.value === undefined) return undefined;
  const map = reader.mapping(entry.value, entry.path, 'a string_match like { exact: gold }');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, STRING_MATCH_FIELDS);
  const ignoreCase = readFlag(reader, fields.get('ignore_case')) ?? false;
  const given = [...fields.values()].filter((field) => field.name !== 'ignore_case');
  if (given.length !== 1) {
    reader.report(map, entry.path, `a string_match takes exactly one of exact, prefix, suffix, contains, safe_regex; got ${given.length === 0 ? 'none' : given.map((field) => field.name).join(' and ')}`);
    return undefined;
  }
  return readComparison(reader, given[0]!, COMPARISONS[given[0]!.name]!, { name, ignoreCase, invert });
}

function readComparison(reader: DocumentReader, entry: Entry, kind: HeaderMatchKind, base: { name: string; ignoreCase: boolean; invert: boolean }): HeaderMatcher | undefined {
  if (kind === 'present') {
    const present = readFlag(reader, entry);
    return present === undefined ? undefined : { ...base, kind, present };
  }
  if (kind === 'safe_regex') {
    const regex = readRegex(reader, entry, base.ignoreCase);
    return regex === undefined ? undefined : { ...base, kind, regex };
  }
  const value = readText(reader, entry);
  if (value === undefined) {
    if (entry.value === undefined) reader.report(entry.key, entry.path, `${entry.name} needs the text to compare with`);
    return undefined;
  }
  return { ...base, kind, value: base.ignoreCase ? value.toLowerCase() : value };
}

/**
 * envoy's RegexMatcher (`safe_regex: { regex: "..." }`, or the pattern alone), compiled to match a
 * whole value as envoy's does. envoy takes RE2; JavaScript's syntax is a superset for the usual
 * patterns, and a pattern JavaScript cannot compile is refused here, at load.
 */
export function readRegex(reader: DocumentReader, entry: Entry, ignoreCase = false): RegExp | undefined {
  let patternNode: Node | undefined = entry.value;
  let where = entry.path;
  if (patternNode !== undefined && isMap(patternNode)) {
    const fields = reader.entries(patternNode, entry.path, REGEX_FIELDS);
    const regexEntry = fields.get('regex');
    if (regexEntry === undefined) {
      reportMissing(reader, patternNode, entry.path, 'regex', 'give the pattern, e.g. regex: "^/v[0-9]+/users$"');
      return undefined;
    }
    patternNode = regexEntry.value;
    where = regexEntry.path;
  }
  if (patternNode === undefined || !isScalar(patternNode)) {
    reader.report(patternNode ?? entry.key, where, `${entry.name} must be a pattern (text) or { regex: pattern }`);
    return undefined;
  }
  const pattern = String(patternNode.source ?? patternNode.value);
  if (pattern.length > MAX_REGEX_LENGTH) {
    reader.report(patternNode, where, `the pattern is ${pattern.length} characters; at most ${MAX_REGEX_LENGTH} are accepted`);
    return undefined;
  }
  try {
    return new RegExp(`^(?:${pattern})$`, ignoreCase ? 'i' : '');
  } catch (error) {
    reader.report(patternNode, where, `${JSON.stringify(pattern)} is not a valid regular expression: ${(error as Error).message}`);
    return undefined;
  }
}
