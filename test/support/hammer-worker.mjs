// A separate OS process for the exactness tests: for each job (a policy and a key), fires
// `attempts` decisions at the job's key, `concurrency` at a time, all jobs at once, through the
// built package, and prints how many each job had admitted as JSON (one entry per job).
import { createLimiter, memcachedStore, redisStore } from '../../dist/index.js';

const [storeJson, jobsJson, attemptsText, concurrencyText, limiterJson] = process.argv.slice(2);
const storeOptions = JSON.parse(storeJson);
// `servers`: the Memcached store's options; anything else, the Redis store's.
const store = storeOptions.servers !== undefined ? memcachedStore(storeOptions) : redisStore(storeOptions);
await store.ready();
// Exactness is what is measured here: a generous deadline keeps a loaded machine from turning slow answers into local ones.
// An optional fifth argument: more limiter options (e.g. a failure mode), as JSON.
const limiter = createLimiter({ store, deadlineMs: 10_000, ...(limiterJson === undefined ? {} : JSON.parse(limiterJson)) });

/** One job's attempts at its key: `concurrency` callers taking attempts until none are left. */
async function hammer({ policy, key }) {
  let remaining = Number(attemptsText);
  let admitted = 0;
  let failed = 0;
  let firstError;
  async function caller() {
    while (remaining > 0) {
      remaining -= 1;
      try {
        if ((await limiter.limit(key, policy)).allowed) admitted += 1;
      } catch (error) {
        failed += 1;
        firstError ??= String(error);
      }
    }
  }
  await Promise.all(Array.from({ length: Number(concurrencyText) }, caller));
  return { admitted, failed, ...(firstError === undefined ? {} : { firstError }) };
}

const results = await Promise.all(JSON.parse(jobsJson).map(hammer));
await limiter.close();
process.stdout.write(JSON.stringify(results));
