/**
 * The request path as routes see it and the upstream gets it, normalised as envoy's HTTP connection
 * manager does: escaped slashes first (`path_with_escaped_slashes_action`), then RFC 3986
 * (`normalize_path`: percent-encoded unreserved characters decoded, `\` read as `/`, dot segments
 * removed), then `merge_slashes`. Matching a path the upstream would resolve differently lets
 * `/./admin` past a limit on `/admin`; forwarding the normalised path means both read one path.
 * The query string is never touched.
 */

/** What an escaped slash (`%2F`, `%5C`, any case) in the path does (envoy's PathWithEscapedSlashesAction). */
export const ESCAPED_SLASH_ACTIONS = ['keep_unchanged', 'reject_request', 'unescape_and_redirect', 'unescape_and_forward'] as const;
export type EscapedSlashAction = (typeof ESCAPED_SLASH_ACTIONS)[number];

/** The configuration's path settings (top level, as envoy's are the connection manager's). */
export interface PathSettings {
  /** `normalize_path`: RFC 3986 normalisation; a path that has none (bad percent-encoding, NUL) is refused. */
  readonly normalize: boolean;
  /** `merge_slashes`: `//` → `/` in the path. */
  readonly mergeSlashes: boolean;
  readonly escapedSlashes: EscapedSlashAction;
}

/** envoy's recommended settings for an edge proxy, the gateway's defaults. */
export const EDGE_PATH_SETTINGS: PathSettings = { normalize: true, mergeSlashes: true, escapedSlashes: 'unescape_and_redirect' };

/** A request target after normalisation: forward it, redirect the client to it, or refuse the request. */
export type NormalizedTarget =
  | { readonly kind: 'forward'; readonly target: string }
  | { readonly kind: 'redirect'; readonly target: string }
  | { readonly kind: 'refuse'; readonly reason: string };

const PERCENT = 37;
const SLASH = 47;
const BACKSLASH = 92;

/** Normalises `target` (path and query, as in the request line) under `settings`. */
export function normalizeTarget(target: string, settings: PathSettings): NormalizedTarget {
  if (target.charCodeAt(0) !== SLASH) return { kind: 'refuse', reason: `the request target must be a path starting with /, got ${quote(target)}` };
  // No RFC lets a client send a fragment, and an upstream drops it: `/admin#x` is `/admin` to it (envoy refuses it too).
  if (target.includes('#')) return { kind: 'refuse', reason: 'the request path has a fragment (#...), which a client never sends; remove it' };
  const queryAt = target.indexOf('?');
  let path = queryAt === -1 ? target : target.slice(0, queryAt);
  const query = queryAt === -1 ? '' : target.slice(queryAt);
  let redirect = false;
  if (settings.escapedSlashes !== 'keep_unchanged' && ESCAPED_SLASH.test(path)) {
    if (settings.escapedSlashes === 'reject_request') return { kind: 'refuse', reason: 'the request path has an escaped slash (%2F or %5C), which this gateway refuses (path_with_escaped_slashes_action)' };
    path = path.replace(ESCAPED_SLASHES, (escape) => (escape[1] === '2' ? '/' : '\\'));
    redirect = settings.escapedSlashes === 'unescape_and_redirect';
  }
  if (settings.normalize) {
    const decoded = decodeUnreserved(path);
    if (typeof decoded !== 'string') return decoded;
    path = removeDotSegments(decoded);
  }
  if (settings.mergeSlashes && path.includes('//')) path = path.replace(/\/{2,}/g, '/');
  const normalized = path + query;
  return redirect ? { kind: 'redirect', target: normalized } : { kind: 'forward', target: normalized };
}

const ESCAPED_SLASH = /%(?:2f|5c)/i;
const ESCAPED_SLASHES = /%2f|%5c/gi;

/** `~`, `-`, `.`, `_`, letters and digits: their percent-encoded form means the character itself (RFC 3986 §2.3). */
function isUnreserved(code: number): boolean {
  return (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a) || (code >= 0x30 && code <= 0x39) || code === 0x2d || code === 0x2e || code === 0x5f || code === 0x7e;
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  const lower = code | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * Decodes the percent-encoded unreserved characters and reads `\` as `/`; other escapes stay as
 * written (their case too). A `%` without two hex digits, and NUL (raw or `%00`), have no
 * normalised form: refused.
 */
function decodeUnreserved(path: string): string | NormalizedTarget {
  if (!path.includes('%') && !path.includes('\\') && !path.includes('\0')) return path;
  let out = '';
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i);
    if (code === 0) return { kind: 'refuse', reason: 'the request path has a NUL character' };
    if (code === BACKSLASH) {
      out += '/';
      continue;
    }
    if (code !== PERCENT) {
      out += path[i];
      continue;
    }
    const high = hexValue(path.charCodeAt(i + 1));
    const low = hexValue(path.charCodeAt(i + 2));
    if (high < 0 || low < 0) return { kind: 'refuse', reason: `the request path has a % not followed by two hex digits (${quote(path.slice(i, i + 3))}); write a literal % as %25` };
    const byte = high * 16 + low;
    if (byte === 0) return { kind: 'refuse', reason: 'the request path has a NUL character (%00)' };
    out += isUnreserved(byte) ? String.fromCharCode(byte) : path.slice(i, i + 3);
    i += 2;
  }
  return out;
}

/** RFC 3986 §5.2.4 on an absolute path: `.` segments dropped, `..` drops the one before (never above the root). */
function removeDotSegments(path: string): string {
  // A dot segment starts after a slash (a `\` was read as one already).
  if (!path.includes('/.')) return path;
  const segments = path.split('/');
  const out: string[] = [];
  // segments[0] is the empty text before the leading slash.
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    const last = i === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') out.pop();
      // A final dot segment leaves the directory it names: `/a/b/..` is `/a/`.
      if (last) out.push('');
      continue;
    }
    out.push(segment);
  }
  return '/' + out.join('/');
}

function quote(text: string): string {
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
}
