/**
 * A real store with faults put in at the `Store` interface (which is public: users write their
 * own): the next decision can be slow (sent to the store after a delay, so it lands past its
 * deadline and still counts) or hung (never settles, never reaches the store). Everything else
 * goes straight to the real store. The model-based suite uses it to know, for each fault, whether
 * the store recorded the call.
 */
import type { CompiledPolicy, Decision, MaybePromise, Store, StoreRequest } from '../../src/index.js';

export type Fault = 'slow' | 'hang';

export class FaultyStore implements Store {
  readonly name = 'faulty';
  private next: Fault | undefined;
  /** The slow calls sent on to the store: their answers, once they land. */
  private readonly landing: Promise<Decision>[] = [];

  constructor(
    private readonly inner: Store,
    private readonly slowMs: number,
  ) {}

  /** The next `consume` is slow or hung (undefined: a fault the guard answered without the store is dropped). */
  fault(kind: Fault | undefined): void {
    this.next = kind;
  }

  /** Whether the fault set was met (the guard may have answered without calling the store: breaker open). */
  get pending(): boolean {
    return this.next !== undefined;
  }

  /** Waits for the slow calls to land; their store answers, in order. */
  async landed(): Promise<Decision[]> {
    return Promise.all(this.landing.splice(0));
  }

  consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): MaybePromise<Decision> {
    const fault = this.next;
    this.next = undefined;
    if (fault === 'hang') return new Promise<Decision>(() => undefined);
    if (fault === 'slow') {
      const landing = new Promise<void>((resolve) => setTimeout(resolve, this.slowMs)).then(() => this.inner.consume(key, policy, cost, now));
      this.landing.push(landing);
      return landing;
    }
    return this.inner.consume(key, policy, cost, now);
  }

  peek(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): MaybePromise<Decision> {
    return this.inner.peek(key, policy, cost, now);
  }

  consumeAll(requests: readonly StoreRequest[], now: number | undefined, commit: boolean): MaybePromise<Decision[]> {
    return this.inner.consumeAll(requests, now, commit);
  }

  reset(key: string, policy: CompiledPolicy): MaybePromise<void> {
    return this.inner.reset(key, policy);
  }

  resetPrefix(prefix: string): MaybePromise<number> {
    return this.inner.resetPrefix(prefix);
  }

  /** The real store is the test file's to close. */
  async close(): Promise<void> {}
}
