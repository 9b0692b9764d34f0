/**
 * Fair shares (`share: { group, weight }`, docs/semantics.md "Fair shares"): the tenants (keys) of
 * one group share a fixed-window policy's `limit` L as the group's total per window. A tenant is
 * active when it asked in the current window or the one before (so one that asks every window
 * stays active, and one that stops goes idle at the end of the next window); its guaranteed share is
 * g = ⌊L × w / Σw(active)⌋. A request of cost c from tenant t is admitted when
 *   total + c ≤ L  and  (used_t + c ≤ g_t  or  total + c + Σ_{o≠t active} max(0, g_o − used_o) ≤ L):
 * within its own share, or within what is left after reserving every other active tenant's unused
 * share (what an idle tenant does not claim is lent to the busy ones: max-min fairness). All
 * integers below 2^53 (L × w ≤ 2^53 − 1 is checked when the policy compiles), so the memory store
 * and scripts/fair-share.lua compute the same decisions in any order of tenants.
 *
 * This file is the reference: the group's state as plain data, decided in place. The memory store
 * holds one per (group, window) (store/fair-share-memory.ts); Redis keeps the same fields in one
 * hash under the group's hash tag.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { SHARE_RANGES } from '../policy-share.js';
import { floorDiv } from './integer.js';
import { impossible, outcome } from './outcome.js';

/** One tenant of a group: what it used in window `window`, its weight and when it last asked. */
export interface ShareTenant {
  used: number;
  /** The window start `used` counts in (an older one: 0 used now). */
  window: number;
  weight: number;
  seen: number;
}

/** A group's state under one window length: the window, its total, and the tenants by key. */
export interface ShareGroupState {
  start: number;
  total: number;
  readonly tenants: Map<string, ShareTenant>;
}

/** A fresh group (nothing used, no tenant). */
export function freshShareGroup(): ShareGroupState {
  return { start: 0, total: 0, tenants: new Map() };
}

/** The figures one decision needs, read from the group at `now` for tenant `key`. */
interface ShareView {
  readonly start: number;
  readonly total: number;
  readonly used: number;
  /** Σ_{o≠t active} max(0, g_o − used_o). */
  readonly reserved: number;
  readonly guaranteed: number;
  /** Whether the tenant is new and the group holds its most tenants already. */
  readonly full: boolean;
}

/** A tenant's used units in window `start`. */
function usedIn(tenant: ShareTenant | undefined, start: number): number {
  return tenant !== undefined && tenant.window === start ? tenant.used : 0;
}

/** Whether a tenant that last asked at `seen` is idle in the window starting at `start`: it asked in neither that window nor the one before. */
function idle(seen: number, start: number, windowMs: number): boolean {
  return seen < start - windowMs;
}

function viewOf(group: ShareGroupState, key: string, weight: number, now: number, policy: CompiledPolicy): ShareView {
  const { windowMs, limit } = policy;
  let start = floorDiv(now, windowMs) * windowMs;
  // A clock that went back keeps counting in the later window rather than opening a fresh one.
  if (group.start > start) start = group.start;
  const total = group.start === start ? group.total : 0;
  let sum = weight;
  let others = 0;
  for (const [name, tenant] of group.tenants) {
    if (name === key || idle(tenant.seen, start, windowMs)) continue;
    sum += tenant.weight;
    others += 1;
  }
  let reserved = 0;
  for (const [name, tenant] of group.tenants) {
    if (name === key || idle(tenant.seen, start, windowMs)) continue;
    const unused = floorDiv(limit * tenant.weight, sum) - usedIn(tenant, start);
    if (unused > 0) reserved += unused;
  }
  const own = group.tenants.get(key);
  return { start, total, used: usedIn(own, start), reserved, guaranteed: floorDiv(limit * weight, sum), full: own === undefined && others >= SHARE_RANGES.tenants };
}

/** What tenant `key` may take now: max(0, min(L − total, max(g_t − used_t, L − total − reserved))). */
function roomOf(view: ShareView, limit: number): number {
  const free = limit - view.total;
  const room = Math.min(free, Math.max(view.guaranteed - view.used, free - view.reserved));
  return room > 0 ? room : 0;
}

/**
 * Decides a request of `cost` from tenant `key` (weight from `policy.share`) at `now`; with
 * `commit`, records it if admitted and, admitted or not, marks the tenant active with its weight
 * (and forgets tenants idle for a window). `limit` is the group's L, `remaining` what this tenant
 * may take now.
 */
export function decideShare(group: ShareGroupState, key: string, now: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision {
  const { windowMs, limit } = policy;
  const weight = policy.share!.weight;
  const view = viewOf(group, key, weight, now, policy);
  const end = view.start + windowMs;
  // A newcomer past the cap waits for a tenant to go idle, at a window's end at the earliest; nothing is recorded.
  if (view.full) return outcome(policy, now, cost === 0, 0, end, cost === 0 ? 0 : end - now);
  const room = roomOf(view, limit);
  if (cost > limit) return impossible(policy, now, room, view.total > 0 ? end : now);
  const allowed = cost <= room;
  if (commit) record(group, key, weight, now, allowed ? cost : 0, view, policy);
  // Denied: within a window the total and every share only grow, so nothing changes before its end.
  return allowed ? outcome(policy, now, true, room - cost, end, 0) : outcome(policy, now, false, room, end, end - now);
}

function record(group: ShareGroupState, key: string, weight: number, now: number, cost: number, view: ShareView, policy: CompiledPolicy): void {
  for (const [name, tenant] of group.tenants) if (idle(tenant.seen, view.start, policy.windowMs)) group.tenants.delete(name);
  group.start = view.start;
  group.total = view.total + cost;
  group.tenants.set(key, { used: view.used + cost, window: view.start, weight, seen: Math.max(now, group.tenants.get(key)?.seen ?? 0) });
}

/** Forgets tenant `key` of the group: its units of the current window leave the total. */
export function forgetShareTenant(group: ShareGroupState, key: string): void {
  const tenant = group.tenants.get(key);
  if (tenant === undefined) return;
  if (tenant.window === group.start) group.total = Math.max(0, group.total - tenant.used);
  group.tenants.delete(key);
}
