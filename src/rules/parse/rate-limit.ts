/**
 * Reading a `rate_limit:` block: envoy's fields (`unit`, `requests_per_unit`, `unlimited`, `name`,
 * `replaces`, all inside `rate_limit` as in envoy's loader) and Tollgate's additions (`algorithm`,
 * `burst`, `precision`, `unit_multiplier`, `soft_percent`, `failure_mode`, `deadline_ms`, `lease_size`,
 * `sync_interval_ms`, `cost`, `block_duration`, `calendar` and `time_zone`: parse/calendar.ts, `share`: parse/share.ts), checked with the engine's
 * own ranges and capacity rules (policy.ts), so a file that loads never fails later when its
 * limits are compiled.
 */
import type { YAMLMap } from 'yaml';
import { ALGORITHMS, POLICY_RANGES, type AlgorithmName, countsExactly, policyCapacity, precisionWindowProblem, wideBound } from '../../policy.js';
import { freezeNode, readChoice, readDuration, readFlag, readText, readWholeNumber, reportMissing } from './fields.js';
import type { DocumentReader, Entry, FieldSet } from './fields.js';
import { offsetOf } from './yaml.js';
import { RULE_UNIT_NAMES, ruleWindowMs, type RuleUnit } from '../../units.js';
import { FAILURE_MODES, LEASABLE_ALGORITHMS, MAX_DEADLINE_MS, MAX_SYNC_INTERVAL_MS, MIN_SYNC_INTERVAL_MS } from '../../limiter/index.js';
import type { RateLimitConfig } from '../types.js';
import { fitsCalendar } from './calendar.js';
import { fitsShare, readShare } from './share.js';

/** envoy's protocol carries `requests_per_unit` (the policy's limit) as a uint32. */
const MAX_REQUESTS_PER_UNIT = 4_294_967_295;
/** Fields that shape a limit, so make no sense with `unlimited: true`. */
const SHAPING_FIELDS = ['unit', 'requests_per_unit', 'unit_multiplier', 'algorithm', 'burst', 'precision', 'soft_percent', 'failure_mode', 'deadline_ms', 'lease_size', 'sync_interval_ms', 'cost', 'block_duration', 'calendar', 'time_zone', 'share'];

const DESCRIPTOR_LEVEL = 'belongs to the descriptor (next to rate_limit), not inside rate_limit';

/** The keys of a `rate_limit` block. */
export const RATE_LIMIT_FIELDS: FieldSet = {
  what: 'a rate_limit',
  names: ['unit', 'requests_per_unit', 'unlimited', 'name', 'replaces', 'algorithm', 'burst', 'precision', 'unit_multiplier', 'soft_percent', 'failure_mode', 'deadline_ms', 'lease_size', 'sync_interval_ms', 'cost', 'block_duration', 'calendar', 'time_zone', 'share'],
  misplaced: {
    key: DESCRIPTOR_LEVEL,
    value: DESCRIPTOR_LEVEL,
    descriptors: DESCRIPTOR_LEVEL,
    shadow_mode: DESCRIPTOR_LEVEL,
    detailed_metric: DESCRIPTOR_LEVEL,
    value_to_metric: DESCRIPTOR_LEVEL,
    quota_mode: DESCRIPTOR_LEVEL,
    share_threshold: DESCRIPTOR_LEVEL,
    metadata: DESCRIPTOR_LEVEL,
    rate_limit: 'cannot be nested inside rate_limit',
    domain: 'belongs at the top of the document, not inside rate_limit',
  },
};

const REPLACES_FIELDS: FieldSet = { what: 'a replaces entry', names: ['name'], misplaced: {} };

type Fields = Map<string, Entry>;

/**
 * Reads `rate_limit:`; undefined when it is empty (no limit, as envoy reads it) or has problems
 * (recorded in the reader).
 */
export function readRateLimit(reader: DocumentReader, entry: Entry): RateLimitConfig | undefined {
  if (entry.value === undefined) return undefined;
  const map = reader.mapping(entry.value, entry.path, 'a rate_limit mapping (unit, requests_per_unit, ...)');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, RATE_LIMIT_FIELDS);
  const unlimitedFlag = readFlag(reader, fields.get('unlimited'));
  const nameText = readText(reader, fields.get('name'));
  const name = nameText === '' ? undefined : nameText;
  const replaces = readReplaces(reader, fields.get('replaces'), name);
  // An unreadable `unlimited` was recorded; whether unit and requests_per_unit are due is unknown.
  if (unlimitedFlag === undefined && fields.get('unlimited')?.value !== undefined) return undefined;
  const unlimited = unlimitedFlag ?? false;
  const common = { name, replaces, location: reader.problems.locate(offsetOf(entry.key)) };
  if (unlimited) {
    rejectShaping(reader, fields);
    return freezeNode<RateLimitConfig>({ ...common, unlimited, unitMultiplier: 1, algorithm: 'fixed-window', softPercent: 0 });
  }
  const shape = readShape(reader, map, entry.path, fields);
  return shape === undefined ? undefined : freezeNode({ ...common, unlimited, ...shape });
}

function rejectShaping(reader: DocumentReader, fields: Fields): void {
  for (const field of SHAPING_FIELDS) {
    const entry = fields.get(field);
    if (entry?.value !== undefined) {
      reader.report(entry.key, entry.path, `unlimited: true takes no ${field}; remove ${field}, or remove unlimited to enforce a limit`);
    }
  }
}

type Shape = Pick<RateLimitConfig, 'unit' | 'requestsPerUnit' | 'unitMultiplier' | 'algorithm' | 'burst' | 'precision' | 'softPercent' | 'failureMode' | 'deadlineMs' | 'leaseSize' | 'syncIntervalMs' | 'cost' | 'blockMs' | 'calendar' | 'timeZone' | 'share'>;

/** The limit itself: how many per how long, and how it is counted. */
function readShape(reader: DocumentReader, map: YAMLMap, path: string, fields: Fields): Shape | undefined {
  const unit = readChoice(reader, fields.get('unit'), RULE_UNIT_NAMES, (text) => text.toLowerCase());
  const requestsPerUnit = readWholeNumber(reader, fields.get('requests_per_unit'), POLICY_RANGES.limit.min, MAX_REQUESTS_PER_UNIT);
  if (fields.get('unit')?.value === undefined) reportMissing(reader, map, path, 'unit', `say what the limit counts per (unit: ${RULE_UNIT_NAMES.join(', ')}), or set unlimited: true`);
  if (fields.get('requests_per_unit')?.value === undefined) {
    reportMissing(reader, map, path, 'requests_per_unit', 'say how many requests each unit allows (requests_per_unit: 100), or set unlimited: true');
  }
  const shape = {
    unit,
    requestsPerUnit,
    unitMultiplier: readWholeNumber(reader, fields.get('unit_multiplier'), 1),
    algorithm: readChoice(reader, fields.get('algorithm'), ALGORITHMS, (text) => text.toLowerCase()),
    burst: readWholeNumber(reader, fields.get('burst'), POLICY_RANGES.burst.min, POLICY_RANGES.burst.max),
    precision: readWholeNumber(reader, fields.get('precision'), POLICY_RANGES.precision.min, POLICY_RANGES.precision.max),
    softPercent: readWholeNumber(reader, fields.get('soft_percent'), POLICY_RANGES.softPercent.min, POLICY_RANGES.softPercent.max),
    failureMode: readChoice(reader, fields.get('failure_mode'), FAILURE_MODES, (text) => text.toLowerCase()),
    deadlineMs: readWholeNumber(reader, fields.get('deadline_ms'), 1, MAX_DEADLINE_MS),
    leaseSize: readWholeNumber(reader, fields.get('lease_size'), 2, 1_000_000),
    syncIntervalMs: readWholeNumber(reader, fields.get('sync_interval_ms'), MIN_SYNC_INTERVAL_MS, MAX_SYNC_INTERVAL_MS),
    cost: readWholeNumber(reader, fields.get('cost'), 1),
    blockMs: readDuration(reader, fields.get('block_duration'), POLICY_RANGES.blockDuration.max),
    calendar: readFlag(reader, fields.get('calendar')),
    timeZone: readText(reader, fields.get('time_zone')),
    share: readShare(reader, fields.get('share')),
  };
  // A field that is present but unreadable was recorded; leave the limit out.
  for (const [field, key] of SHAPE_KEYS) if (fields.get(key)?.value !== undefined && shape[field] === undefined) return undefined;
  if (unit === undefined || requestsPerUnit === undefined) return undefined;
  const complete = {
    ...shape,
    unit,
    requestsPerUnit,
    unitMultiplier: shape.unitMultiplier ?? 1,
    algorithm: shape.algorithm ?? 'fixed-window',
    softPercent: shape.softPercent ?? 0,
  };
  const fits = [fitsWindow, fitsExactArithmetic, fitsPrecision, fitsLocalFirst, fitsLease, fitsPenalty, fitsCalendar, fitsShare];
  return fits.every((check) => check(reader, fields, complete)) ? complete : undefined;
}

/** The window, `unit` × `unit_multiplier`, within the engine's range (policy.ts POLICY_RANGES.window). */
function fitsWindow(reader: DocumentReader, fields: Fields, shape: Shape & { unit: RuleUnit }): boolean {
  const windowMs = ruleWindowMs(shape.unit, shape.unitMultiplier);
  const { max } = POLICY_RANGES.window;
  if (windowMs <= max) return true;
  const entry = fields.get('unit_multiplier')!;
  reader.report(
    entry.value,
    entry.path,
    `unit_multiplier ${shape.unitMultiplier} makes a window of ${windowMs} ms, past the longest window counted exactly, ${max} ms (2^53 − 1); lower unit_multiplier to ${Math.floor(max / ruleWindowMs(shape.unit, 1))} or less`,
  );
  return false;
}

/** `precision` splits a sliding window into buckets of at least 1 ms (policy.ts checkPrecision). */
function fitsPrecision(reader: DocumentReader, fields: Fields, shape: Shape & { unit: RuleUnit }): boolean {
  const entry = fields.get('precision');
  if (entry === undefined || shape.precision === undefined) return true;
  if (shape.algorithm !== 'sliding-window') {
    reader.report(entry.key, entry.path, `precision applies to algorithm sliding-window only, not ${shape.algorithm}; remove precision or set algorithm: sliding-window`);
    return false;
  }
  const problem = precisionWindowProblem(shape.precision, ruleWindowMs(shape.unit, shape.unitMultiplier));
  if (problem !== undefined) reader.report(entry.value, entry.path, problem);
  return problem === undefined;
}

/** Local-first adds up window counts across nodes: window algorithms only, and not with a lease. */
function fitsLocalFirst(reader: DocumentReader, fields: Fields, shape: Shape): boolean {
  const entry = fields.get('sync_interval_ms');
  if (entry === undefined || shape.syncIntervalMs === undefined) return true;
  if (shape.leaseSize !== undefined) {
    reader.report(entry.key, entry.path, 'sync_interval_ms (local-first) and lease_size are two ways of deciding without the store; keep one');
    return false;
  }
  if (shape.algorithm !== 'fixed-window' && shape.algorithm !== 'sliding-window') {
    reader.report(entry.key, entry.path, `sync_interval_ms (local-first) needs algorithm fixed-window or sliding-window, whose counts add up across nodes; ${shape.algorithm} cannot (and lease_size keeps fixed-window and sliding-window caps only): remove sync_interval_ms or change the algorithm`);
    return false;
  }
  if ((shape.precision ?? 1) > 1) {
    reader.report(entry.key, entry.path, `sync_interval_ms (local-first) syncs a two-window count; a sliding window of precision ${shape.precision} cannot sync (remove precision, or use lease_size instead)`);
    return false;
  }
  return true;
}

/** A lease keeps the caps of fixed-window and sliding-window only (limiter/checks.ts leaseRefusal). */
function fitsLease(reader: DocumentReader, fields: Fields, shape: Shape & { algorithm: AlgorithmName }): boolean {
  const entry = fields.get('lease_size');
  if (entry === undefined || shape.leaseSize === undefined || LEASABLE_ALGORITHMS.includes(shape.algorithm)) return true;
  reader.report(entry.key, entry.path, `lease_size keeps the caps of algorithm fixed-window and sliding-window only, not ${shape.algorithm}: leased permits would be spent while it refills or slides, past its limit; remove lease_size or set algorithm: fixed-window or sliding-window`);
  return false;
}

/** A penalty lives in the store, which a lease or local-first does not ask per request (limiter/checks.ts PENALTY_DECIDED_LOCALLY). */
function fitsPenalty(reader: DocumentReader, fields: Fields, shape: Shape): boolean {
  const entry = fields.get('block_duration');
  const local = shape.leaseSize !== undefined ? 'lease_size' : shape.syncIntervalMs !== undefined ? 'sync_interval_ms' : undefined;
  if (entry === undefined || shape.blockMs === undefined || local === undefined) return true;
  reader.report(entry.key, entry.path, `block_duration and ${local}: ${local} admits without asking the store, where the block is kept, so the block would not be honoured; keep one`);
  return false;
}

const SHAPE_KEYS: ReadonlyArray<readonly [keyof Shape, string]> = [
  ['unit', 'unit'],
  ['requestsPerUnit', 'requests_per_unit'],
  ['unitMultiplier', 'unit_multiplier'],
  ['algorithm', 'algorithm'],
  ['burst', 'burst'],
  ['precision', 'precision'],
  ['softPercent', 'soft_percent'],
  ['failureMode', 'failure_mode'],
  ['deadlineMs', 'deadline_ms'],
  ['leaseSize', 'lease_size'],
  ['syncIntervalMs', 'sync_interval_ms'],
  ['cost', 'cost'],
  ['blockMs', 'block_duration'],
  ['calendar', 'calendar'],
  ['timeZone', 'time_zone'],
  ['share', 'share'],
];

/**
 * The engine counts in integers that must stay exact in doubles (JS and Lua) and refuses policies
 * that could round (policy.ts countsExactly), so the loader refuses them first, at the number at fault.
 */
function fitsExactArithmetic(reader: DocumentReader, fields: Fields, shape: Shape & { unit: RuleUnit; requestsPerUnit: number }): boolean {
  const windowMs = ruleWindowMs(shape.unit, shape.unitMultiplier);
  const { nominalCapacity: nominal, capacity, setBy } = policyCapacity(shape.algorithm, shape.requestsPerUnit, shape.burst, shape.softPercent);
  if (countsExactly(shape.algorithm, capacity, windowMs, shape.requestsPerUnit)) return true;
  // A bucket without burst takes its capacity from requests_per_unit.
  const entry = fields.get(setBy === 'burst' && shape.burst !== undefined ? 'burst' : 'requests_per_unit')!;
  const window = shape.unitMultiplier === 1 ? `1 ${shape.unit}` : `${shape.unitMultiplier} ${shape.unit}s`;
  reader.report(
    entry.value,
    entry.path,
    `${entry.name} ${nominal} per ${window} is too large for ${shape.algorithm} to count exactly: ${wideBound(shape.algorithm, 'requests_per_unit')}; ${setBy === 'burst' ? 'lower the burst or use a shorter unit' : 'use a shorter window'}, or use fixed-window (the default) or sliding-log, which count any quota exactly`,
  );
  return false;
}

/** `replaces: [{ name: other }]`: each entry names another limit. */
function readReplaces(reader: DocumentReader, entry: Entry | undefined, ownName: string | undefined): readonly string[] {
  if (entry?.value === undefined) return Object.freeze([]);
  const items = reader.list(entry.value, entry.path, 'a list of entries like - name: other_limit');
  const names: string[] = [];
  for (const item of items ?? []) {
    const map = item.node === undefined ? undefined : reader.mapping(item.node, item.path, 'an entry like name: other_limit');
    if (item.node === undefined) reader.report(item.raw ?? entry.value, `${item.path}.name`, 'empty replaces entry: write - name: other_limit');
    if (map === undefined) continue;
    const nameEntry = reader.entries(map, item.path, REPLACES_FIELDS).get('name');
    const name = readText(reader, nameEntry);
    if (nameEntry === undefined || (nameEntry.value === undefined && name === undefined)) {
      reportMissing(reader, map, item.path, 'name', 'each replaces entry names the limit it replaces (- name: other_limit)');
    } else if (name === '') {
      reader.report(nameEntry.value ?? nameEntry.key, nameEntry.path, 'name must not be empty: write the name of the limit this one replaces');
    } else if (name !== undefined && name === ownName) {
      reader.report(nameEntry.value, nameEntry.path, `${JSON.stringify(name)} is this limit's own name; a limit cannot replace itself`);
    } else if (name !== undefined) {
      names.push(name);
    }
  }
  return Object.freeze(names);
}
