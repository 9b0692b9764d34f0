// A rate-limited API (Tollgate's middleware, 2 requests a second per path) and two clients of it:
// one that backs off when told to, one that paces itself so it is never told.
import { createServer } from 'node:http';
import { createClient } from 'tollgate/client';
import { rateLimit } from 'tollgate/http';

const limiter = rateLimit({
  policy: { algorithm: 'token-bucket', limit: 2, window: '1s' },
  headers: 'both', // X-RateLimit-* and the IETF RateLimit-Policy / RateLimit fields
  key: (req, view) => view.path,
});
const server = createServer(async (req, res) => {
  if (await limiter.handle(req, res)) res.end('ok\n');
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const api = `http://127.0.0.1:${server.address().port}`;

// 1. Retries: the third request in a row meets a 429 and is retried after Retry-After.
async function retryingClient() {
  const lines = ['retrying client:'];
  const client = createClient({
    onRetry: ({ attempt, delayMs, response }) =>
      lines.push(`  429: retry ${attempt}, waiting at least Retry-After (${response.headers.get('retry-after')} s): ${delayMs >= 1000}`),
  });
  for (let i = 0; i < 3; i++) lines.push(`  GET /a → ${(await client.fetch(`${api}/a`)).status}`);
  return lines.join('\n');
}

// 2. Pacing: the client learns "2 per second" from the first answer and waits its turn.
async function pacedClient() {
  const client = createClient({ pacing: true, maxAttempts: 1 });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await client.fetch(`${api}/b`)).status);
  return `paced client:\n  GET /b ×4 → ${statuses.join(' ')}`;
}

// The two run side by side (each path has its own quota).
console.log((await Promise.all([retryingClient(), pacedClient()])).join('\n'));

server.close();
await limiter.close();
