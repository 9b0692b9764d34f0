/**
 * Reading the forwarded headers a proxy appends to: one entry at a time, from the right (where the
 * proxies write), into a reusable {@link Address}. Which entries count is client-ip.ts's business.
 */
import { parseHost, type Address } from './addresses.js';
import { BACKSLASH, COMMA, QUOTE, SEMICOLON, isSpace } from './text.js';

/** An entry between commas, optional white space around it. */
export function parseTrimmed(text: string, start: number, end: number, out: Address): boolean {
  while (start < end && isSpace(text.charCodeAt(start))) start++;
  while (end > start && isSpace(text.charCodeAt(end - 1))) end--;
  return parseHost(text, start, end, out);
}

/** Index of the last ',' in `text[lower..end)`, or lower - 1. */
export function lastComma(text: string, lower: number, end: number): number {
  let i = end - 1;
  while (i >= lower && text.charCodeAt(i) !== COMMA) i--;
  return i;
}

/**
 * Index of the last ',' outside a quoted string in `text[lower..end)`, or lower - 1. Read from the
 * right, where the proxies write: a client's unbalanced quote further left cannot hide their entries.
 */
export function lastElementSeparator(text: string, lower: number, end: number): number {
  let quoted = false;
  let i = end - 1;
  for (; i >= lower; i--) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let backslashes = 0;
      while (i - backslashes - 1 >= lower && text.charCodeAt(i - backslashes - 1) === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) quoted = !quoted;
    } else if (c === COMMA && !quoted) {
      break;
    }
  }
  return i;
}

/**
 * The `for=` address of one RFC 7239 element (`for=192.0.2.60;proto=http;by=203.0.113.43`). The
 * value may be quoted (`for="[2001:db8::1]:4711"`, required for IPv6). `unknown`, an obfuscated
 * `_name` or port, a quoted value with escapes, no `for=` or two of them: not an address.
 */
export function parseForwardedFor(text: string, start: number, end: number, out: Address): boolean {
  let found = false;
  let valid = false;
  let pairStart = start;
  while (pairStart < end) {
    let pairEnd = pairStart;
    let quoted = false;
    for (; pairEnd < end; pairEnd++) {
      const c = text.charCodeAt(pairEnd);
      if (quoted) {
        if (c === BACKSLASH) pairEnd++;
        else if (c === QUOTE) quoted = false;
      } else if (c === QUOTE) {
        quoted = true;
      } else if (c === SEMICOLON) {
        break;
      }
    }
    pairEnd = Math.min(pairEnd, end);
    let s = pairStart;
    let e = pairEnd;
    while (s < e && isSpace(text.charCodeAt(s))) s++;
    while (e > s && isSpace(text.charCodeAt(e - 1))) e--;
    if (
      e - s > 4 &&
      (text.charCodeAt(s) | 0x20) === 102 &&
      (text.charCodeAt(s + 1) | 0x20) === 111 &&
      (text.charCodeAt(s + 2) | 0x20) === 114 &&
      text.charCodeAt(s + 3) === 61
    ) {
      if (found) return false;
      found = true;
      let valueStart = s + 4;
      let valueEnd = e;
      if (text.charCodeAt(valueStart) === QUOTE) {
        if (valueEnd - valueStart < 2 || text.charCodeAt(valueEnd - 1) !== QUOTE) return false;
        valueStart++;
        valueEnd--;
      }
      valid = parseHost(text, valueStart, valueEnd, out);
    }
    pairStart = pairEnd + 1;
  }
  return valid;
}
