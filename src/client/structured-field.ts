/**
 * A small, forgiving reader of HTTP structured-field Lists and Dictionaries (RFC 9651), enough for
 * the rate-limit fields: `"default";r=50;t=30` (a List member with parameters) and
 * `limit=100, remaining=50` (Dictionary members). It never throws: a member it cannot read is
 * left out, and the caller decides what a missing value means.
 */

/** A bare item: a String or Token (text), an Integer or Decimal (number), a Boolean. */
export type BareItem = string | number | boolean;

/** One comma-separated member: `key=value;p=1` (Dictionary) or `value;p=1` (List). */
export interface FieldMember {
  /** The Dictionary key, when the member is written `key=value`. */
  readonly key: string | undefined;
  readonly value: BareItem;
  readonly params: ReadonlyMap<string, BareItem>;
}

/** Longer fields are not read: a rate-limit field is a few dozen bytes, not kilobytes. */
const MAX_FIELD_LENGTH = 4096;
const KEY = /^[a-z*][a-z0-9_\-.*]*$/;
const NUMBER = /^-?\d{1,15}(?:\.\d{1,3})?$/;
const TOKEN = /^[A-Za-z*][A-Za-z0-9!#$%&'*+\-.^_`|~:/]*$/;

/** The members of `field`, in order; unreadable members are skipped. */
export function parseMembers(field: string | null): FieldMember[] {
  if (field === null || field.length > MAX_FIELD_LENGTH) return [];
  const members: FieldMember[] = [];
  for (const text of splitOutsideQuotes(field, ',')) {
    const member = parseMember(text);
    if (member !== undefined) members.push(member);
  }
  return members;
}

/** `key=value;params` or `value;params`; undefined when any part is unreadable. */
function parseMember(text: string): FieldMember | undefined {
  const [head = '', ...paramTexts] = splitOutsideQuotes(text, ';');
  const params = new Map<string, BareItem>();
  for (const paramText of paramTexts) {
    const param = parseKeyValue(paramText);
    if (param === undefined || param.key === undefined) return undefined;
    params.set(param.key, param.value);
  }
  const main = parseKeyValue(head);
  return main === undefined ? undefined : { key: main.key, value: main.value, params };
}

/** `key=value`, `key` alone (true, as the RFC says) or a bare value. */
function parseKeyValue(raw: string): { key: string | undefined; value: BareItem } | undefined {
  const text = raw.trim();
  if (text === '') return undefined;
  const equals = text.startsWith('"') ? -1 : text.indexOf('=');
  if (equals === -1) {
    const value = parseBareItem(text);
    if (value === undefined) return undefined;
    // A lone lower-case token is a key whose value is true (a flag); a List's token value reads the same.
    return { key: KEY.test(text) ? text : undefined, value: KEY.test(text) ? true : value };
  }
  const key = text.slice(0, equals).trim();
  const value = parseBareItem(text.slice(equals + 1).trim());
  return KEY.test(key) && value !== undefined ? { key, value } : undefined;
}

function parseBareItem(text: string): BareItem | undefined {
  if (text.startsWith('"')) return parseString(text);
  if (NUMBER.test(text)) return Number(text);
  if (text === '?1' || text === '?0') return text === '?1';
  if (/^:[A-Za-z0-9+/=]*:$/.test(text)) return text;
  return TOKEN.test(text) ? text : undefined;
}

/** A quoted String: `\"` and `\\` are the only escapes; anything after the closing quote is an error. */
function parseString(text: string): string | undefined {
  let out = '';
  for (let i = 1; i < text.length; i++) {
    const char = text[i]!;
    if (char === '\\') {
      const next = text[++i];
      if (next !== '"' && next !== '\\') return undefined;
      out += next;
    } else if (char === '"') {
      return i === text.length - 1 ? out : undefined;
    } else {
      out += char;
    }
  }
  return undefined;
}

/** Splits on `separator` wherever it is not inside a quoted string. */
function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quoted && char === '\\') i++;
    else if (char === '"') quoted = !quoted;
    else if (!quoted && char === separator) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}
