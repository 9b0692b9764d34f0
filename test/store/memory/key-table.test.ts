/**
 * The memory store's hash table against a Map model: random inserts and removals (with long probe
 * runs and wrap-around at the table's end) never lose or confuse a key.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyTable } from '../../../src/store/key-table.js';

describe('KeyTable', () => {
  it('agrees with a Map under random inserts and removals', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 900 })), { minLength: 500, maxLength: 4000 }),
        (operations) => {
          const table = new KeyTable(16);
          let slots = 16;
          const model = new Map<string, number>();
          const freeSlots: number[] = [];
          let nextSlot = 0;
          for (const [insert, space, id] of operations) {
            const key = `k${id}`;
            const modelKey = `${space}/${key}`;
            const found = table.find(space, key);
            expect(found).toBe(model.get(modelKey) ?? -1);
            if (insert && found < 0) {
              const slot = freeSlots.pop() ?? nextSlot++;
              if (slot >= slots) {
                slots *= 2;
                table.growSlots(slots);
              }
              table.insert(space, key, slot);
              model.set(modelKey, slot);
            } else if (!insert && found >= 0) {
              table.remove(found);
              model.delete(modelKey);
              freeSlots.push(found);
            }
          }
          for (const [modelKey, slot] of model) {
            const [space, key] = modelKey.split('/') as [string, string];
            expect(table.find(Number(space), key)).toBe(slot);
            expect(table.keyOf(slot)).toBe(key);
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});
