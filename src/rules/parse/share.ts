/**
 * `share: { group: api, weight: 3 }` under `rate_limit`: fair shares of one capacity (the policy's
 * `share`, docs/semantics.md "Fair shares"): the keys of the group share `requests_per_unit` per
 * window. Checked with the engine's own rule (policy-share.ts checkShare), every problem at its line
 * and column.
 */
import { SHARE_RANGES, type ShareSpec } from '../../policy.js';
import { checkShare } from '../../policy-share.js';
import type { RateLimitConfig } from '../types.js';
import { readText, readWholeNumber, reportMissing, type DocumentReader, type Entry, type FieldSet } from './fields.js';

const SHARE_FIELDS: FieldSet = { what: 'share', names: ['group', 'weight'], misplaced: {} };

/** `share:` when given and readable (undefined else, its problems reported); `weight` defaults to 1. */
export function readShare(reader: DocumentReader, entry: Entry | undefined): ShareSpec | undefined {
  if (entry?.value === undefined) return undefined;
  const map = reader.mapping(entry.value, entry.path, 'a mapping (share: { group: api, weight: 1 })');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, SHARE_FIELDS);
  if (fields.get('group') === undefined) reportMissing(reader, map, entry.path, 'group', 'name the group whose keys share the limit (group: api)');
  const group = readText(reader, fields.get('group'));
  const weight = fields.get('weight') === undefined ? 1 : readWholeNumber(reader, fields.get('weight'), SHARE_RANGES.weight.min, SHARE_RANGES.weight.max);
  return group === undefined || weight === undefined ? undefined : Object.freeze({ group, weight });
}

type ShareShape = Pick<RateLimitConfig, 'algorithm' | 'softPercent' | 'calendar' | 'blockMs' | 'leaseSize' | 'syncIntervalMs' | 'share'> & { readonly requestsPerUnit: number };

/** Whether `share` fits the rest of the limit (the engine's rule, and no lease or local-first); reports the problem at `share`. */
export function fitsShare(reader: DocumentReader, fields: ReadonlyMap<string, Entry>, shape: ShareShape): boolean {
  const entry = fields.get('share');
  if (entry === undefined || shape.share === undefined) return true;
  if (shape.calendar === true) {
    reader.report(entry.key, entry.path, 'share needs a window of a fixed length (unit and unit_multiplier); remove calendar, or remove share');
    return false;
  }
  const local = shape.leaseSize !== undefined ? 'lease_size' : shape.syncIntervalMs !== undefined ? 'sync_interval_ms' : undefined;
  if (local !== undefined) {
    reader.report(entry.key, entry.path, `share and ${local}: ${local} admits without asking the store, where the group's shares are weighed; keep one`);
    return false;
  }
  const policy = {
    algorithm: shape.algorithm,
    softPercent: shape.softPercent,
    ...(shape.blockMs !== undefined ? { blockDuration: shape.blockMs } : {}),
  };
  try {
    checkShare(shape.share, policy, shape.requestsPerUnit);
    return true;
  } catch (error) {
    const message = (error as Error).message.replace(/^.*?: /, '').replace('softPercent', 'soft_percent').replace('blockDuration', 'block_duration');
    reader.report(entry.key, entry.path, message.replace("algorithm: 'fixed-window'", 'algorithm: fixed-window').replace('lower the limit', 'lower requests_per_unit'));
    return false;
  }
}
