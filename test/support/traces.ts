/**
 * Request traces shared by the scale tests: the same bursty arrivals decided in several modes
 * (exact, lease, local-first), so their admitted counts can be compared.
 */

/** One request: when (ms from the trace's start) and to which node. */
export interface TraceEvent {
  readonly at: number;
  readonly node: number;
}

/**
 * Bursts of 1–40 requests at one instant, pauses of 0–200 ms, each request to a random node of
 * `nodes`; the same `seed` gives the same trace.
 */
export function burstyTrace(requests: number, seed: number, nodes = 3): TraceEvent[] {
  let state = seed;
  const random = (): number => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const trace: TraceEvent[] = [];
  let at = 0;
  while (trace.length < requests) {
    const burst = 1 + Math.floor(random() * 40);
    for (let i = 0; i < burst && trace.length < requests; i++) trace.push({ at, node: Math.floor(random() * nodes) });
    at += Math.floor(random() * 200);
  }
  return trace;
}
