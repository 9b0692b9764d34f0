/**
 * The item of one key's state under one policy, as the compare-and-set lanes hold it:
 *
 *   <state>[;b=<block end>][;u=<keep until>][;r=<record>/<record>/…]
 *
 * `<state>` is the algorithm's numbers, comma-separated (what every state item held before
 * penalties and reservations came); `b=` the end of the key's penalty (`blockDuration`) on the
 * calls' timeline; `u=` the instant of the writer's clock the item must outlive for its block and
 * records; `r=` the key's reservation records (reservations.ts), oldest first. A state and what
 * rides beside it are thereby changed in one compare-and-set: a denial and the block it starts, a
 * reserve's debit and its record, a settle's refund and its settled mark.
 * An aligned fixed window counted by `incr` (window-counter.ts) holds one packed integer instead;
 * it is read as its `[count, window start]` here, and written back in this form.
 */
import { floorDiv } from '../../algorithms/integer.js';
import { slotAlgorithms } from '../../algorithms/registry.js';
import { decideSlidingBuckets } from '../../algorithms/sliding-window-buckets.js';
import type { Decision } from '../../decision.js';
import type { CompiledPolicy } from '../../policy.js';
import { blockedDecision, startsBlock } from '../penalty.js';
import { decodeState, encodeState, foreignValue, realUntil, stateSize } from './keys.js';
import type { ItemCodec, ItemOp } from './cas-lanes.js';
import { decodeRecords, encodeRecords, type ReservationRecord } from './records.js';
import { packsWindow, unpack } from './window-counter.js';

export interface StateItem {
  readonly state: Float64Array;
  /** The end of the key's block on the calls' timeline; 0: none. */
  blockUntil: number;
  /** This node's clock instant the item must be kept until for its block and records; 0: none. */
  keepUntil: number;
  /** Reservation records by record id, oldest first. */
  readonly records: Map<string, ReservationRecord>;
}

const WHOLE = /^\d+$/;

/**
 * The codec of `policy`'s state items. `now`, the call's explicit time (else the round's clock),
 * places a packed window count in its window: the packing keeps the window number's low bits only.
 */
export function stateCodec(policy: CompiledPolicy, now: number | undefined): ItemCodec<StateItem> {
  return {
    decode: (key, text, clock) => decodeItem(key, text, policy, now ?? clock),
    encode: encodeItem,
    keepUntil: (item) => item.keepUntil,
  };
}

function decodeItem(key: string, text: string | undefined, policy: CompiledPolicy, at: number): StateItem {
  const item: StateItem = { state: new Float64Array(stateSize(policy)), blockUntil: 0, keepUntil: 0, records: new Map() };
  if (text === undefined) return item;
  if (WHOLE.test(text) && packsWindow(policy)) {
    const stored = unpack(key, Number(text), floorDiv(at, policy.windowMs));
    item.state[0] = stored.count;
    item.state[1] = stored.index * policy.windowMs;
    return item;
  }
  const [state, ...sections] = text.split(';');
  decodeState(key, state!, item.state);
  for (const section of sections) {
    const value = section.slice(2);
    if (section.startsWith('b=') && WHOLE.test(value)) item.blockUntil = Number(value);
    else if (section.startsWith('u=') && WHOLE.test(value)) item.keepUntil = Number(value);
    else if (section.startsWith('r=')) decodeRecords(key, value, item.records);
    else throw foreignValue(key, text);
  }
  return item;
}

function encodeItem(item: StateItem): string {
  let text = encodeState(item.state);
  if (item.blockUntil > 0) text += `;b=${item.blockUntil}`;
  if (item.keepUntil > 0 && (item.blockUntil > 0 || item.records.size > 0)) text += `;u=${item.keepUntil}`;
  if (item.records.size > 0) text += `;r=${encodeRecords(item.records)}`;
  return text;
}

/** `policy`'s algorithm on `state` (from index 0), penalties aside. */
export function decideState(state: Float64Array, now: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision {
  if (policy.precision > 1) return decideSlidingBuckets(state, 0, now, cost, policy, commit);
  return slotAlgorithms[policy.algorithm as keyof typeof slotAlgorithms].decide(state, 0, now, cost, policy, commit);
}

/**
 * `policy`'s decision of `cost` at `at` on the item, penalties included (as store/penalty.ts on the
 * memory store): while blocked, a denial from a look at the state; a committed plain denial starts
 * a block, stored in the item beside the state.
 */
export function decideItem(item: StateItem, at: number, cost: number, policy: CompiledPolicy, commit: boolean, explicitNow: boolean): Decision {
  if (policy.blockMs === 0) return decideState(item.state, at, cost, policy, commit);
  if (item.blockUntil > at) return blockedDecision(decideState(item.state, at, cost, policy, false), item.blockUntil, at);
  const decision = decideState(item.state, at, cost, policy, commit);
  if (!commit || !startsBlock(policy, decision)) return decision;
  item.blockUntil = at + policy.blockMs;
  item.keepUntil = Math.max(item.keepUntil, realUntil(item.blockUntil, at, explicitNow));
  return { ...blockedDecision(decision, item.blockUntil, at), blockStarted: true };
}

/** A consume of `cost` as one compare-and-set step. */
export function consumeOp(policy: CompiledPolicy, cost: number, now: number | undefined): ItemOp<StateItem, Decision> {
  return (item, clock) => {
    const at = now ?? clock;
    const decision = decideItem(item, at, cost, policy, true, now !== undefined);
    return { value: decision, until: realUntil(decision.resetAt, at, now !== undefined) };
  };
}

/** What a call of `cost` would get on the item held as `text` (a look: nothing written). */
export function peekItem(key: string, text: string | undefined, policy: CompiledPolicy, cost: number, at: number): Decision {
  return decideItem(decodeItem(key, text, policy, at), at, cost, policy, false, false);
}

/** A reset of an item holding reservation records: the state and its block forgotten, the records kept. */
export function resetOp(): ItemOp<StateItem, void> {
  return (item) => {
    item.state.fill(0);
    item.blockUntil = 0;
    return { value: undefined, until: 0 };
  };
}
