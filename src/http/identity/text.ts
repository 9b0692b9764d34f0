/**
 * What every identity module reads: request headers through a {@link HeaderGetter}, scanned by
 * character code (no regular expressions on the per-request path).
 */

/** Reads a request header by lower-case name; several values joined with ', ' (node's convention). */
export type HeaderGetter = (name: string) => string | undefined;

export const DOT = 46;
export const COLON = 58;
export const COMMA = 44;
export const SEMICOLON = 59;
export const QUOTE = 34;
export const BACKSLASH = 92;
export const PERCENT = 37;
export const OPEN_BRACKET = 91;
export const CLOSE_BRACKET = 93;
export const SPACE = 32;
export const TAB = 9;

export function isSpace(c: number): boolean {
  return c === SPACE || c === TAB;
}
