/**
 * Concurrency slots in Prometheus metrics, from the service's `slot` events (check/acquire.ts):
 * acquires by result, releases by result, and the slots held, counted by the store at scrape time
 * over the keys this process answered an acquire of most recently (at most {@link HELD_KEYS}).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ServiceContext, SlotEvent } from '../context.js';

/** Keys the gauge counts: those this process answered an acquire of most recently, the newest kept. */
export const HELD_KEYS = 1_000;
/** How long a scrape waits for the store to count the slots held. */
const HELD_DEADLINE_MS = 1_000;

/** Registers the slot metrics and counts `slot` events; returns the unsubscribe. */
export function defineSlotMetrics(ctx: ServiceContext, registers: Registry[]): () => void {
  // Each tracked key with its count as last known (answered by an acquire, or counted at a scrape).
  const held = new Map<string, number>();
  const acquires = new Counter({
    name: 'tollgate_slot_acquires_total',
    help: 'Concurrency slot acquires (POST /v1/acquire), by result: granted, refused.',
    labelNames: ['result'] as const,
    registers,
  });
  const releases = new Counter({
    name: 'tollgate_slot_releases_total',
    help: 'Concurrency slot releases (POST /v1/release), by result: released (a held slot was freed), not_held (released already, expired, or never granted).',
    labelNames: ['result'] as const,
    registers,
  });
  new Gauge({
    name: 'tollgate_slots_held',
    help: `Concurrency slots held now, counted by the store at scrape time (every node's, expired ones not), over the keys this process answered an acquire of most recently (at most ${HELD_KEYS}) and found holding slots at the last scrape; when the store cannot answer, as last known.`,
    registers,
    async collect() {
      this.set(await countHeld(ctx, held));
    },
  });
  const track = (key: string, count: number | undefined): void => {
    const known = count ?? held.get(key) ?? 0;
    held.delete(key);
    held.set(key, known);
    if (held.size > HELD_KEYS) held.delete(held.keys().next().value!);
  };
  const onSlot = (event: SlotEvent): void => {
    if (event.op === 'acquire') {
      acquires.inc({ result: event.allowed ? 'granted' : 'refused' });
      track(event.key, event.degraded === undefined ? event.held : undefined);
      return;
    }
    releases.inc({ result: event.allowed ? 'released' : 'not_held' });
    // A release keeps the key's place (a rules release names its domain, not its keys: it matches none).
    const before = held.get(event.key);
    if (before !== undefined) held.set(event.key, event.allowed ? Math.max(0, before - 1) : before);
  };
  acquires.inc({ result: 'granted' }, 0);
  acquires.inc({ result: 'refused' }, 0);
  ctx.events.on('slot', onSlot);
  return () => ctx.events.off('slot', onSlot);
}

/**
 * The slots held over the tracked keys, as the store counts them now (one guarded store call); a
 * key found without slots stops being tracked. When the store cannot answer: the last known counts.
 */
async function countHeld(ctx: ServiceContext, held: Map<string, number>): Promise<number> {
  const keys = [...held.keys()];
  let sum = 0;
  if (keys.length === 0) return sum;
  try {
    const counts = await ctx.limiter.heldSlots(keys, { deadlineMs: HELD_DEADLINE_MS });
    keys.forEach((key, i) => {
      const count = counts[i]!;
      sum += count;
      // Still the newest first: the counts replace in place, the empty keys leave.
      if (count === 0) held.delete(key);
      else if (held.has(key)) held.set(key, count);
    });
    return sum;
  } catch {
    for (const count of held.values()) sum += count;
    return sum;
  }
}
