// rate-limiter-flexible's RateLimiterRedis as a benchmark subject, on an ioredis Redis or Cluster
// client made by the caller: `decide(key) → Promise<boolean>` (admitted?) and `close()`.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export async function rlflexSubject(client, { points, duration }) {
  const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');
  await new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  });
  const rl = new RateLimiterRedis({ storeClient: client, points, duration, keyPrefix: 'rlflx' });
  return {
    // consume() resolves to admit and rejects with a RateLimiterRes to deny; anything else is an error.
    decide: async (key) => {
      try {
        await rl.consume(key);
        return true;
      } catch (error) {
        if (error instanceof RateLimiterRes) return false;
        throw error;
      }
    },
    close: () => client.quit(),
  };
}
