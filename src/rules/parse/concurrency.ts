/**
 * A descriptor's `concurrency: { limit: 10, ttl: 30s }`: at most `limit` requests matching it in
 * flight at once (limiter/concurrency.ts), each slot held until released or `ttl` passes. Checked
 * with the limiter's own bounds, every problem at its line and column.
 */
import { MAX_SLOTS, checkSlotTtl } from '../../limiter/index.js';
import type { ConcurrencyConfig } from '../types.js';
import { readText, readWholeNumber, reportMissing, type DocumentReader, type Entry, type FieldSet } from './fields.js';

const CONCURRENCY_FIELDS: FieldSet = { what: 'concurrency', names: ['limit', 'ttl'], misplaced: {} };

/** `{ concurrency }` when the entry is given and valid, else nothing (its problems reported). */
export function readConcurrency(reader: DocumentReader, entry: Entry | undefined): { concurrency?: ConcurrencyConfig } {
  if (entry?.value === undefined) return {};
  const map = reader.mapping(entry.value, entry.path, 'a mapping (concurrency: { limit: 10, ttl: 30s })');
  if (map === undefined) return {};
  const fields = reader.entries(map, entry.path, CONCURRENCY_FIELDS);
  const limitEntry = fields.get('limit');
  const ttlEntry = fields.get('ttl');
  if (limitEntry === undefined) reportMissing(reader, map, entry.path, 'limit', `the most requests in flight at once (limit: 10, at most ${MAX_SLOTS})`);
  if (ttlEntry === undefined) reportMissing(reader, map, entry.path, 'ttl', 'how long a slot whose holder died stays taken (ttl: 30s)');
  const limit = readWholeNumber(reader, limitEntry, 1, MAX_SLOTS);
  const ttlText = readText(reader, ttlEntry);
  let ttlMs: number | undefined;
  if (ttlText !== undefined) {
    try {
      ttlMs = checkSlotTtl(/^\d+$/.test(ttlText) ? Number(ttlText) : ttlText, 'ttl');
    } catch (error) {
      reader.report(ttlEntry!.value, ttlEntry!.path, (error as Error).message);
    }
  }
  return limit === undefined || ttlMs === undefined ? {} : { concurrency: Object.freeze({ limit, ttlMs }) };
}
