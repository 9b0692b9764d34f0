/**
 * The service's two HTTP planes (docs/service.md, "Planes"), as Envoy separates its listeners from
 * its admin interface. The decision listener (`--port`) answers what callers and Envoy send:
 * `/json`, `/v1/check`, `/v1/limit`, and health. The admin listener (`--admin-port` on
 * `--admin-bind`, loopback by default) serves what shows or changes the service: the dashboard,
 * `/metrics`, `/v1/events`, the rules in force and the admin API; it answers health too, so probes
 * may use either. Keeping them apart means opening the decision port to a network does not show
 * callers' addresses and ids (the dashboard, the metrics) to that network.
 */
import type { Registry } from 'prom-client';
import { observeGuard } from './auth.js';
import { addAdminRoutes } from './routes.js';
import type { ServiceContext } from '../context.js';
import { attachDashboard } from '../observe/dashboard.js';
import { HttpRoutes, addHealthRoutes, decisionRoutes, type ListenerPlan } from '../http/listener.js';
import { attachMetrics } from '../observe/metrics.js';

/** Both planes' routes, and the parts of the admin plane that must be closed. */
export interface ServicePlanes {
  readonly decision: ListenerPlan;
  readonly admin: ListenerPlan;
  readonly metrics: { readonly registry: Registry; close(): void };
  readonly dashboard: { close(): void };
}

/** Builds the decision plane's and the admin plane's route tables. */
export function buildPlanes(ctx: ServiceContext): ServicePlanes {
  const adminRoutes = new HttpRoutes();
  addHealthRoutes(ctx, adminRoutes);
  addAdminRoutes(ctx, adminRoutes);
  const metrics = attachMetrics(ctx, adminRoutes);
  const dashboard = attachDashboard(ctx, adminRoutes);
  const guard = observeGuard(ctx);
  return {
    decision: { routes: decisionRoutes(ctx), elsewhere: { routes: adminRoutes, where: 'the admin listener (--admin-port)' } },
    admin: { routes: adminRoutes, ...(guard !== undefined ? { observeGuard: guard } : {}) },
    metrics,
    dashboard,
  };
}
