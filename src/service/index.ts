/**
 * The decision service as the gateway and the command line use it: starting it, its options and
 * flags, one check, and the HTTP pieces the gateway shares (TLS, connection close, error replies).
 * Only re-exports: src/gateway/ and src/cli/ reach the service through here (test/architecture.test.ts).
 */
export { createLogger, startService, type RunningService, type ServiceHooks } from './server.js';
export type { ServiceContext } from './context.js';
export { DEFAULT_ADMIN_PORT, SERVE_FLAGS, SWITCH_FLAGS, resolveServiceOptions, type ConnectionLimits, type ServiceOptions } from './options.js';
export { decideCheck, degradedAnswer } from './check/decide.js';
export { errorReply } from './http/body.js';
export { PORT_RANGE } from './http/listener-options.js';
export { closeSilentConnections, followConnections } from './http/close.js';
export { secureServer, type secureContextOptions } from './http/tls.js';
export type { DrainState } from './health/readiness.js';
export { startReportsPrimary } from './cluster/primary.js';
export type { ListenerAddresses } from './health/address-file.js';
