/**
 * Concurrency slots in Prometheus metrics, from the service's `slot` events (check/acquire.ts):
 * acquires by result, releases by result, and the slots held as the store last answered them,
 * summed over the keys this process answered for most recently (at most {@link HELD_KEYS}).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ServiceContext, SlotEvent } from '../context.js';

/** Keys whose last answered `held` the gauge sums: the most recently answered first kept. */
export const HELD_KEYS = 1_000;

/** Registers the slot metrics and counts `slot` events; returns the unsubscribe. */
export function defineSlotMetrics(ctx: ServiceContext, registers: Registry[]): () => void {
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
    help: `Concurrency slots held, as the store last answered for each of the ${HELD_KEYS} keys this process answered most recently (slots left to expire count until their key is answered again).`,
    registers,
    collect() {
      let sum = 0;
      for (const count of held.values()) sum += count;
      this.set(sum);
    },
  });
  const remember = (key: string, count: number): void => {
    held.delete(key);
    if (count > 0) held.set(key, count);
    if (held.size > HELD_KEYS) held.delete(held.keys().next().value!);
  };
  const onSlot = (event: SlotEvent): void => {
    if (event.op === 'acquire') {
      acquires.inc({ result: event.allowed ? 'granted' : 'refused' });
      if (event.degraded === undefined) remember(event.key, event.held);
      return;
    }
    releases.inc({ result: event.allowed ? 'released' : 'not_held' });
    const before = held.get(event.key);
    if (event.allowed && before !== undefined) remember(event.key, before - 1);
  };
  acquires.inc({ result: 'granted' }, 0);
  acquires.inc({ result: 'refused' }, 0);
  ctx.events.on('slot', onSlot);
  return () => ctx.events.off('slot', onSlot);
}
