/**
 * `tollgate --help`'s text and the names of the commands whose help command-help.ts generates:
 * light on purpose, as main.ts loads it for every command (each command's own code is imported
 * only when that command runs).
 */
export const GLOBAL_USAGE = `Usage: tollgate <command> [options]

Commands:
  serve         Run the decision service (HTTP JSON, envoy gRPC, an admin listener)
  gateway       A reverse proxy that rate limits, then forwards (docs/gateway.md)
  validate PATH Check a rules file or directory (exit 0 valid, 1 errors)
  simulate      Replay an access log against rules offline (docs/simulate.md)
  replicate     Carry one region's counts to the other regions (docs/scaling.md)
  demo          Every algorithm deciding a burst on the embedded memory store
  check         One decision from a running service
  rules         get [--domain D] | push FILE|DIR | diff FILE|DIR: the running service's rules
  keys          inspect|reset|block|unblock|blocked: the running service's key admin endpoints
  usage         What descriptors used of their rules' quotas; usage export: a period's ledger
  overrides     get|put FILE|-|delete: the running service's per-tenant overrides
  health        A container's health check of this host's tollgate serve
  help          This help; help COMMAND: the command's

Each command has its own help: tollgate <command> --help

Options:
  -h, --help     Show this help
  -v, --version  Show the version
`;

/** The commands whose help command-help.ts generates (check, rules, keys, usage and health carry their own). */
export const HELPED_COMMANDS = ['serve', 'gateway', 'validate', 'simulate', 'replicate', 'demo'] as const;
export type HelpedCommand = (typeof HELPED_COMMANDS)[number];
