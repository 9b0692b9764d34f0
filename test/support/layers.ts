/**
 * The layers of src/, lowest first: what test/architecture.test.ts enforces (a module imports its
 * own layer and the ones below, never above) and what docs/architecture.md's layer table must say
 * (test/docs/architecture-map.test.ts). Matched by path prefix (relative to src/, without
 * extension); the first match wins.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ['errors', 'options', 'duration', 'units', 'keys', 'clock', 'decision', 'tracing', 'algorithms/catalog', 'algorithms/calendar', 'algorithms/ledger-periods'],
  // The SDK for callers: foundations only, never the engine (its users have no limiter).
  ['client/'],
  ['policy', 'policy-share'],
  ['algorithms/'],
  ['store/'],
  ['limiter/'],
  ['rules/'],
  ['http/', 'service/', 'simulate/'],
  ['gateway/'],
  // The admin API's command line: a client of the service over HTTP, using the rules parser.
  ['cli/admin/'],
  ['cli/', 'index'],
];
