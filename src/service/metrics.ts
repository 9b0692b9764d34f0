/** Prometheus metrics at GET /metrics (placeholder: replaced by the metrics work). */
import type { ServiceContext } from './context.js';
import type { HttpRoutes } from './http.js';

export function attachMetrics(_ctx: ServiceContext, routes: HttpRoutes): { close(): void } {
  routes.add('GET', '/metrics', (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    response.end('');
  });
  return { close: () => undefined };
}
