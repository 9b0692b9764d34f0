/** The live dashboard at GET /dashboard (placeholder: replaced by the dashboard work). */
import type { ServiceContext } from './context.js';
import type { HttpRoutes } from './http.js';

export function attachDashboard(_ctx: ServiceContext, routes: HttpRoutes): { close(): void } {
  routes.add('GET', '/dashboard', (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>Tollgate</title><p>Tollgate dashboard</p>');
  });
  return { close: () => undefined };
}
