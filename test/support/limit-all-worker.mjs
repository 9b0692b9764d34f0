// A separate OS process for the multi-limit race. For each scenario ({ store, groups }: redisStore
// options, and groups of { key, policy }) it makes `calls` limitAll calls, `concurrency` at a time,
// through the built package, call i naming group i % groups.length, all at one explicit `now`; the
// scenarios run at once. Prints, per scenario and group, how many calls were admitted and denied.
import { createLimiter, redisStore } from '../../dist/index.js';

const [scenariosJson, callsText, concurrencyText, nowText] = process.argv.slice(2);
const now = Number(nowText);

async function race({ store: storeOptions, groups }) {
  const store = redisStore(storeOptions);
  await store.ready();
  // Exactness is what is measured here: a generous deadline keeps a loaded machine from turning slow answers into local ones.
  const limiter = createLimiter({ store, deadlineMs: 10_000 });
  const admitted = groups.map(() => 0);
  const denied = groups.map(() => 0);
  let failed = 0;
  let next = 0;
  const worker = async () => {
    while (next < Number(callsText)) {
      const group = next % groups.length;
      next += 1;
      try {
        const decisions = await limiter.limitAll(groups[group], { now });
        if (decisions.every((decision) => decision.allowed)) admitted[group] += 1;
        else denied[group] += 1;
      } catch {
        failed += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Number(concurrencyText) }, worker));
  await limiter.close();
  return { admitted, denied, failed };
}

process.stdout.write(JSON.stringify(await Promise.all(JSON.parse(scenariosJson).map(race))));
