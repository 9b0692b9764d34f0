/**
 * Steady load for the chaos tests: POST /v1/check at a fixed rate against several service nodes,
 * every answer recorded with when it was sent, how long it took and what it said. Requests are
 * fired on a timer, never waiting for each other, so a slow answer cannot slow the load down.
 */

export interface Sample {
  /** Epoch ms the request was sent. */
  readonly at: number;
  /** Index of the node (URL) it went to. */
  readonly node: number;
  /** The descriptor key it checked. */
  readonly key: string;
  /** HTTP status, or 0 when no answer came (error or timeout). */
  readonly status: number;
  /** Round trip in ms. */
  readonly ms: number;
  /** The `tollgate-degraded` header: which failure mode answered, or null. */
  readonly degraded: string | null;
  readonly error?: string;
}

export interface Load {
  readonly samples: Sample[];
  /** Stops sending and waits for every answer still out. */
  stop(): Promise<Sample[]>;
}

export interface LoadOptions {
  /** Requests per second, all nodes together. */
  readonly perSecond: number;
  /** The key of the i-th request (its value is made unique per request). */
  readonly keyOf: (i: number) => string;
  /** The value sent with the i-th request's key. Default: one of 50 values, `v0`..`v49`. */
  readonly valueOf?: (i: number, key: string) => string;
  /** Longest wait for an answer before it counts as hung. Default 2,000 ms. */
  readonly timeoutMs?: number;
  readonly domain: string;
}

/** Sends checks to `baseUrls` (round robin) until stopped. */
export function startLoad(baseUrls: readonly string[], options: LoadOptions): Load {
  const samples: Sample[] = [];
  const pending = new Set<Promise<void>>();
  let i = 0;
  const send = (): void => {
    const index = i++;
    const node = index % baseUrls.length;
    const key = options.keyOf(index);
    const body = JSON.stringify({ domain: options.domain, descriptors: [{ entries: [{ key, value: options.valueOf?.(index, key) ?? `v${index % 50}` }] }] });
    const at = Date.now();
    const started = performance.now();
    const request = fetch(`${baseUrls[node]}/v1/check`, { method: 'POST', body, signal: AbortSignal.timeout(options.timeoutMs ?? 2_000) })
      .then(async (response) => {
        await response.arrayBuffer();
        samples.push({ at, node, key, status: response.status, ms: performance.now() - started, degraded: response.headers.get('tollgate-degraded') });
      })
      .catch((error: unknown) => {
        samples.push({ at, node, key, status: 0, ms: performance.now() - started, degraded: null, error: (error as Error).message });
      })
      .finally(() => pending.delete(request));
    pending.add(request);
  };
  const timer = setInterval(send, 1_000 / options.perSecond);
  return {
    samples,
    async stop() {
      clearInterval(timer);
      await Promise.all([...pending]);
      return samples.sort((a, b) => a.at - b.at);
    },
  };
}

/** One Prometheus sample value from a /metrics page, or undefined. */
export function metricValue(page: string, name: string): number | undefined {
  const line = page.split('\n').find((text) => text.startsWith(`${name} `) || text.startsWith(`${name}{`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The largest of `values` (0 for none). */
export function max(values: readonly number[]): number {
  return values.reduce((a, b) => Math.max(a, b), 0);
}
