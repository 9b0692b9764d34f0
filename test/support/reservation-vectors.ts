/**
 * Plays the reserve-then-settle conformance vectors in test/vectors/reservations/*.json against
 * any Store, through the public limiter API (`reserve`, `settle`, `limit`). Every store (memory,
 * Redis, Redis Cluster) must pass the very same files.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createLimiter, type Decision, type Policy, type Settlement, type Store } from '../../src/index.js';

interface ReservationStep {
  readonly op: 'reserve' | 'settle' | 'limit';
  readonly now: number;
  readonly cost: number;
  readonly id?: string;
  readonly ttl?: number;
  /** The decision (reserve, limit) or the settlement, field by field. */
  readonly expect?: Partial<Decision> | (Partial<Omit<Settlement, 'decision'>> & { readonly decision?: Partial<Decision> });
  /** The typed error's code, when the step must be refused. */
  readonly error?: string;
}

interface ReservationCase {
  readonly name: string;
  readonly policy: Policy;
  readonly steps: readonly ReservationStep[];
}

const VECTOR_DIR = new URL('../vectors/reservations/', import.meta.url);

/** `actual`'s fields named in `expected` (one level into `decision`). */
function pick(actual: object, expected: object): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(expected).map(([field, value]) => {
      const got = (actual as Record<string, unknown>)[field];
      return [field, typeof value === 'object' && value !== null && typeof got === 'object' && got !== null ? pick(got, value as object) : got];
    }),
  );
}

/** Registers one test per reservation vector case; `openStore` gives a store per case (keys are fresh per case). */
export function describeReservationVectors(storeName: string, openStore: () => Store | Promise<Store>, playsFile: (file: string) => boolean = () => true): void {
  for (const file of readdirSync(VECTOR_DIR).filter((name) => name.endsWith('.json') && playsFile(name)).sort()) {
    const { cases } = JSON.parse(readFileSync(new URL(file, VECTOR_DIR), 'utf8')) as { cases: ReservationCase[] };
    describe(`${storeName} reservation conformance: ${file}`, () => {
      for (const vectorCase of cases) {
        it(vectorCase.name, async () => {
          const limiter = createLimiter({ store: await openStore(), deadlineMs: 5_000 });
          const key = `reservation:${file}:${Math.random().toString(36).slice(2)}`;
          try {
            for (const [index, step] of vectorCase.steps.entries()) {
              const where = `step ${index} (${step.op} ${step.id ?? ''} cost ${step.cost} at now=${step.now})`;
              const call = (): Promise<Decision | Settlement> => {
                if (step.op === 'limit') return limiter.limit(key, vectorCase.policy, { now: step.now, cost: step.cost });
                if (step.op === 'settle') return limiter.settle(key, vectorCase.policy, { now: step.now, cost: step.cost, id: step.id! });
                return limiter.reserve(key, vectorCase.policy, { now: step.now, cost: step.cost, id: step.id!, ...(step.ttl === undefined ? {} : { ttl: step.ttl }) });
              };
              if (step.error !== undefined) {
                await expect(call(), where).rejects.toMatchObject({ code: step.error });
                continue;
              }
              const answer = await call();
              expect(pick(answer, step.expect ?? {}), where).toEqual(step.expect ?? {});
            }
          } finally {
            await limiter.close();
          }
        });
      }
    });
  }
}
