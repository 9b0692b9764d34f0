/**
 * The gateway configuration's `upstreams`: a name and its origin (`api: "http://127.0.0.1:9000"`),
 * or, for an https:// upstream whose certificate a private CA signed, a mapping with the TLS
 * settings to verify it (`{ url: "https://...", tls: { ca_file: ./ca.crt, server_name: api.internal } }`),
 * and / or a cap on its connections (`{ url: "http://...", max_connections: 64 }`).
 * The CA file is read and checked here, when the configuration is loaded (and at each reload), so a
 * bad one is reported at its `file:line:col` like every other problem.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { isMap, isScalar } from 'yaml';
import { readText, readWholeNumber, reportMissing, type DocumentReader, type Entry, type FieldSet } from '../../rules/parse/fields.js';
import type { UpstreamConfig, UpstreamTls } from './types.js';

const UPSTREAM_FIELDS: FieldSet = { what: 'an upstream', names: ['url', 'tls', 'max_connections'], misplaced: { ca_file: 'belongs in tls (tls: { ca_file: ./ca.crt })', server_name: 'belongs in tls (tls: { server_name: api.internal })' } };
const TLS_FIELDS: FieldSet = {
  what: "an upstream's tls",
  names: ['ca_file', 'server_name'],
  misplaced: { sni: 'is server_name here (tls: { server_name: api.internal })', trusted_ca: 'is ca_file here (tls: { ca_file: ./ca.crt })' },
};
/** A DNS name: what SNI carries and the certificate must name. */
const DNS_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** The names written under `upstreams` (a route naming one whose URL is wrong is not told it is unknown). */
export function declaredNames(entry: Entry | undefined): Set<string> {
  const names = new Set<string>();
  if (entry?.value !== undefined && isMap(entry.value)) for (const pair of entry.value.items) if (isScalar(pair.key)) names.add(String(pair.key.value));
  return names;
}

/** `upstreams: { name: "http://host:port", other: { url: "https://...", tls: {...} } }`; `base` resolves a relative ca_file. */
export function readUpstreams(reader: DocumentReader, entry: Entry | undefined, base: string): Map<string, UpstreamConfig> {
  const upstreams = new Map<string, UpstreamConfig>();
  if (entry?.value === undefined) return upstreams;
  const map = reader.mapping(entry.value, entry.path, 'a mapping of names to URLs, e.g. { api: "http://127.0.0.1:9000" }');
  if (map === undefined) return upstreams;
  for (const pair of map.items) {
    const name = isScalar(pair.key) ? String(pair.key.value) : undefined;
    if (name === undefined || !/^[A-Za-z0-9_.-]+$/.test(name)) {
      reader.report(pair.key as NonNullable<Entry['value']>, entry.path, 'an upstream name is letters, digits, _ . and -, e.g. api');
      continue;
    }
    const path = `${entry.path}.${name}`;
    const upstream = readUpstream(reader, { name, key: pair.key as NonNullable<Entry['value']>, value: reader.resolve(pair.value as NonNullable<Entry['value']>, path), path }, base);
    if (upstream !== undefined) upstreams.set(name, upstream);
  }
  return upstreams;
}

/** The most connections `max_connections` may ask for (one process's sockets to one upstream). */
const MAX_CONNECTIONS_CEILING = 65_535;

/** One upstream: its URL as text, or `{ url, tls, max_connections }`. */
function readUpstream(reader: DocumentReader, entry: Entry, base: string): UpstreamConfig | undefined {
  if (entry.value === undefined || !isMap(entry.value)) {
    const url = readUpstreamUrl(reader, entry);
    return url === undefined ? undefined : { url };
  }
  const fields = reader.entries(entry.value, entry.path, UPSTREAM_FIELDS);
  if (!fields.has('url')) reportMissing(reader, entry.value, entry.path, 'url', 'give the upstream\'s URL, e.g. url: "https://10.0.0.7:8443"');
  const urlEntry = fields.get('url');
  const url = urlEntry === undefined ? undefined : readUpstreamUrl(reader, urlEntry);
  const capEntry = fields.get('max_connections');
  const maxConnections = readWholeNumber(reader, capEntry, 1, MAX_CONNECTIONS_CEILING);
  if (capEntry !== undefined && maxConnections === undefined) return undefined;
  const cap = maxConnections === undefined ? {} : { maxConnections };
  const tlsEntry = fields.get('tls');
  if (tlsEntry === undefined) return url === undefined ? undefined : { url, ...cap };
  if (url !== undefined && url.protocol !== 'https:') {
    reader.report(tlsEntry.key, tlsEntry.path, `tls applies to an https:// upstream, and ${JSON.stringify(url.href.replace(/\/$/, ''))} is http://: write the URL with https://, or remove tls`);
    return undefined;
  }
  const tls = readUpstreamTls(reader, tlsEntry, base);
  return url === undefined || tls === undefined ? undefined : { url, tls, ...cap };
}

function readUpstreamUrl(reader: DocumentReader, entry: Entry): URL | undefined {
  const text = readText(reader, entry);
  if (text === undefined) {
    if (entry.value === undefined) reader.report(entry.key, entry.path, 'give the upstream\'s URL, e.g. "http://127.0.0.1:9000"');
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    reader.report(entry.value, entry.path, `${JSON.stringify(text)} is not a URL; write it like "http://127.0.0.1:9000"`);
    return undefined;
  }
  const problem =
    url.protocol !== 'http:' && url.protocol !== 'https:' ? `the URL must start with http:// or https://, got ${url.protocol}//`
    : url.username !== '' || url.password !== '' ? 'the URL must not carry a user or password'
    : (url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '' ? 'give the origin only (scheme, host and port): request paths are forwarded as they are'
    : undefined;
  if (problem !== undefined) {
    reader.report(entry.value, entry.path, `${JSON.stringify(text)}: ${problem}`);
    return undefined;
  }
  return url;
}

/** `tls: { ca_file, server_name }`, at least one of them. */
function readUpstreamTls(reader: DocumentReader, entry: Entry, base: string): UpstreamTls | undefined {
  if (entry.value === undefined) {
    reader.report(entry.key, entry.path, 'give tls: { ca_file: ./ca.crt } (the CA that signed the upstream\'s certificate) and / or server_name, or remove tls');
    return undefined;
  }
  const map = reader.mapping(entry.value, entry.path, 'a mapping like { ca_file: ./ca.crt, server_name: api.internal }');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, TLS_FIELDS);
  if (fields.size === 0) {
    reader.report(map, entry.path, 'give ca_file (the CA that signed the upstream\'s certificate) and / or server_name, or remove tls');
    return undefined;
  }
  const ca = readCaFile(reader, fields.get('ca_file'), base);
  const serverName = readServerName(reader, fields.get('server_name'));
  if ((fields.has('ca_file') && ca === undefined) || (fields.has('server_name') && serverName === undefined)) return undefined;
  return { ...(ca !== undefined ? ca : {}), ...(serverName !== undefined ? { serverName } : {}) };
}

/** The CA file, read and checked: PEM certificate(s) OpenSSL takes as trust anchors. */
function readCaFile(reader: DocumentReader, entry: Entry | undefined, base: string): { caFile: string; ca: Buffer } | undefined {
  const written = readText(reader, entry);
  if (written === undefined) return undefined;
  const caFile = resolve(base, written);
  let ca: Buffer;
  try {
    ca = readFileSync(caFile);
  } catch (error) {
    reader.report(entry!.value, entry!.path, `ca_file ${caFile} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    return undefined;
  }
  try {
    new X509Certificate(ca);
    createSecureContext({ ca });
  } catch (error) {
    reader.report(entry!.value, entry!.path, `ca_file ${caFile} is not a PEM CA certificate: ${(error as Error).message}`);
    return undefined;
  }
  return { caFile, ca };
}

/** The name the upstream's certificate must carry, sent as SNI (default: the URL's host name). */
function readServerName(reader: DocumentReader, entry: Entry | undefined): string | undefined {
  const name = readText(reader, entry);
  if (name === undefined) return undefined;
  if (isIP(name) !== 0) {
    reader.report(entry!.value, entry!.path, `server_name must be a DNS name, got the address ${name}: an address is not sent as SNI; write it in the url, whose address the certificate must then carry`);
    return undefined;
  }
  if (DNS_NAME.test(name)) return name.toLowerCase();
  reader.report(entry!.value, entry!.path, `server_name must be a DNS name such as api.internal (the name the upstream's certificate carries), got ${JSON.stringify(name)}`);
  return undefined;
}
