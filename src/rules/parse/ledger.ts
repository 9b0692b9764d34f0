/**
 * A descriptor's `ledger:` (docs/quotas.md §3): `ledger: true`, or `{ period, time_zone, keep,
 * refused, ids }` — its limit's decisions summed per key and calendar period for billing. Checked
 * with the engine's own checks (algorithms/ledger-periods.ts), each problem at its line and column.
 */
import { checkLedger, type LedgerOptions } from '../../algorithms/ledger-periods.js';
import type { RateLimitConfig } from '../types.js';
import { readFlag, readText, readWholeNumber, type DocumentReader, type Entry, type FieldSet } from './fields.js';

const LEDGER_FIELDS: FieldSet = { what: 'a ledger', names: ['period', 'time_zone', 'keep', 'refused', 'ids'], misplaced: { timeZone: 'is written time_zone' } };

/** `{ ledger }` when the entry is given and valid, else nothing (its problems reported). */
export function readLedger(reader: DocumentReader, entry: Entry | undefined, rateLimit: RateLimitConfig | undefined): { ledger?: true | LedgerOptions } {
  if (entry?.value === undefined) return {};
  const options = readOptions(reader, entry);
  if (options === undefined) return {};
  if (rateLimit === undefined || rateLimit.unlimited) {
    reader.report(entry.key, entry.path, 'ledger records what a rate_limit admits; add a rate_limit (not unlimited) to this descriptor, or remove ledger');
    return {};
  }
  try {
    checkLedger(options, undefined);
  } catch (error) {
    reader.report(entry.value, entry.path, (error as Error).message.replace(/^Invalid rate limit policy: /, '').replace('ledger.timeZone', 'ledger.time_zone'));
    return {};
  }
  return options === false ? {} : { ledger: options };
}

function readOptions(reader: DocumentReader, entry: Entry): true | false | LedgerOptions | undefined {
  const node = entry.value as { items?: unknown };
  if (node.items === undefined) return readFlag(reader, entry);
  const map = reader.mapping(entry.value!, entry.path, 'true, or a mapping (ledger: { period: month, keep: 13, refused: true })');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, LEDGER_FIELDS);
  const read = {
    period: readText(reader, fields.get('period')),
    timeZone: readText(reader, fields.get('time_zone')),
    keep: readWholeNumber(reader, fields.get('keep'), 1),
    refused: readFlag(reader, fields.get('refused')),
    ids: readWholeNumber(reader, fields.get('ids'), 1),
  };
  const options = Object.fromEntries(Object.entries(read).filter(([, value]) => value !== undefined));
  return Object.freeze(options) as LedgerOptions;
}
