// Keep express-rate-limit; count in Tollgate's Redis store, so every process shares one exact count.
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import { redisStore } from 'tollgate';
import { TollgateStore } from 'tollgate/express-rate-limit';

const redis = redisStore({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }); // or redisStore({ cluster: [...] })
await redis.ready();

const app = express();
app.use(
  rateLimit({
    windowMs: 15 * 60 * 1000,
    limit: 5,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    store: new TollgateStore({ store: redis, prefix: 'erl:api:' }), // the one new line
  }),
);
app.get('/', (req, res) => res.send('hello\n'));

const server = app.listen(Number(process.env.PORT ?? 3000), () => console.log(`listening on ${server.address().port}`));
