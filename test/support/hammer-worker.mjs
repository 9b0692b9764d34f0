// A separate OS process for the exactness tests: fires `attempts` decisions at one key, `concurrency`
// at a time, through the built package, and prints how many were admitted as JSON.
import { createLimiter, redisStore } from '../../dist/index.js';

const [storeJson, policyJson, key, attemptsText, concurrencyText] = process.argv.slice(2);
const store = redisStore(JSON.parse(storeJson));
await store.ready();
// Exactness is what is measured here: a generous deadline keeps a loaded machine from turning slow answers into local ones.
const limiter = createLimiter({ store, deadlineMs: 10_000 });
const policy = JSON.parse(policyJson);
let remaining = Number(attemptsText);
let admitted = 0;
let failed = 0;

async function worker() {
  while (remaining > 0) {
    remaining -= 1;
    try {
      if ((await limiter.limit(key, policy)).allowed) admitted += 1;
    } catch {
      failed += 1;
    }
  }
}

await Promise.all(Array.from({ length: Number(concurrencyText) }, worker));
await limiter.close();
process.stdout.write(JSON.stringify({ admitted, failed }));
