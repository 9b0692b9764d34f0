/**
 * `tollgate demo`: one caller sends 12 requests in a burst, then waits, under each algorithm with a
 * limit of 5 per second, on the embedded memory store. A controlled clock makes the output
 * identical on every run.
 */
import { createLimiter } from '../rules/create-limiter.js';
import { ALGORITHMS } from '../policy.js';
import { memoryStore } from '../store/memory.js';

export async function runDemo(print: (line: string) => void): Promise<void> {
  const limiter = createLimiter({ store: memoryStore() });
  const start = Date.UTC(2026, 0, 1, 12, 0, 0, 900);
  const times = [...Array.from({ length: 8 }, (_, i) => start + i * 10), start + 150, start + 400, start + 1_000, start + 1_100];
  print('Tollgate demo: 5 requests per second, burst of 8 in 80 ms, then 4 spread over 1.1 s');
  print('(resets on the round second for window algorithms; t is ms after the first request)\n');
  for (const algorithm of ALGORITHMS) {
    const policy = { algorithm, limit: 5, window: '1s' } as const;
    const cells: string[] = [];
    for (const now of times) {
      const d = await limiter.limit(`demo:${algorithm}`, policy, { now });
      cells.push(d.allowed ? `t=${now - start}:ok(${d.remaining})` : `t=${now - start}:429(${d.retryAfter}ms)`);
    }
    print(`${algorithm.padEnd(15)} ${cells.join(' ')}`);
  }
  print('\nok(n): admitted, n remaining   429(n ms): denied, retry after n ms');
  await limiter.close();
}
