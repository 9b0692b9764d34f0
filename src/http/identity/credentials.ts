/**
 * What the API-key and JWT identities share: reading a credential from a header (after an optional
 * scheme such as `Bearer`), and checking their options objects.
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { SPACE, type HeaderGetter } from './text.js';

/** Reads `header`, strips `scheme` (case-insensitive, then spaces) when given. */
export interface CredentialReader {
  readonly header: string;
  /** Lower-case scheme without the trailing space, or undefined. */
  readonly scheme: string | undefined;
}

/** Checks `header` and `scheme` once, at startup; `defaultHeader` is used when `header` is not given. */
export function credentialReader(where: string, header: unknown, scheme: unknown, defaultHeader: string): CredentialReader {
  if (header !== undefined && (typeof header !== 'string' || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(header))) {
    throw new InvalidOptionError(`${where}: header must be a header name such as ${JSON.stringify(defaultHeader)}, got ${describeValue(header)}`);
  }
  const name = (header ?? defaultHeader).toLowerCase();
  if (scheme !== undefined && (typeof scheme !== 'string' || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ *$/.test(scheme))) {
    throw new InvalidOptionError(`${where}: scheme must be an authentication scheme such as 'Bearer', got ${describeValue(scheme)}`);
  }
  const written = scheme === undefined ? (name === 'authorization' ? 'Bearer' : undefined) : scheme.trimEnd();
  return { header: name, scheme: written?.toLowerCase() };
}

/** The credential in the request, trimmed; undefined when the header is absent or lacks the scheme. */
export function readCredential(reader: CredentialReader, header: HeaderGetter): string | undefined {
  const value = header(reader.header);
  if (value === undefined) return undefined;
  const scheme = reader.scheme;
  if (scheme === undefined) return value.trim();
  const n = scheme.length;
  if (value.length <= n + 1 || value.charCodeAt(n) !== SPACE || value.slice(0, n).toLowerCase() !== scheme) return undefined;
  return value.slice(n + 1).trim();
}

export { checkOptions } from '../../options.js';
