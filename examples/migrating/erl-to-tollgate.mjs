// The same limits on Tollgate's own middleware: every express-rate-limit option, translated.
import express from 'express';
import { redisStore } from 'tollgate';
import { byApiKey, rateLimit } from 'tollgate/http';

const store = redisStore({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
await store.ready();
const apiKey = byApiKey(); // the x-api-key header, hashed; undefined when absent

const app = express();
app.use(
  rateLimit({
    store, //                                                       store: new RedisStore(...)
    name: 'api', //                                                 identifier: 'api'
    policy: { algorithm: 'fixed-window', limit: 5, window: '15m' }, // windowMs: 15 * 60 * 1000, limit: 5
    key: async (req, view) => (await apiKey(req, view)) ?? view.ipKey, // keyGenerator (IPv6 by /56: ipv6Subnet)
    skip: (req, view) => view.path === '/healthz', //               skip
    headers: 'ietf', //                                             standardHeaders: 'draft-8', legacyHeaders: false
    trustProxy: 'loopback', //                                      app.set('trust proxy', 'loopback')
    failureMode: 'closed', //                                       passOnStoreError: false (503 instead of a 500)
    onError: (error) => console.error('rate limit store:', error.message), // logger
    onLimited: (req, res, info) => res.status(429).json({ error: 'slow down', retryAfter: info.retryAfter }), // handler
  }),
);
app.get('/', (req, res) => res.send('hello\n'));
app.get('/healthz', (req, res) => res.send('ok\n'));

const server = app.listen(Number(process.env.PORT ?? 3000), () => console.log(`listening on ${server.address().port}`));
