/**
 * The help of `tollgate` (the commands, one line each) and of each command that takes flags of its
 * own (`tollgate serve --help`, ...), generated from the tables the parsers read.
 */
import { GATEWAY_FLAGS } from '../gateway/options.js';
import { SERVE_FLAGS } from '../service/index.js';
import { SIMULATE_FLAGS } from '../simulate/command.js';
import { GATEWAY_FLAG_TEXT, REPLICATE_FLAG_TEXT, SERVICE_FLAG_TEXT, SIMULATE_FLAG_TEXT, VALIDATE_FLAG_TEXT } from './flag-help.js';
import { REPLICATE_FLAGS } from './replicate.js';
import { renderCommandHelp, type CommandHelp } from './usage.js';

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
  health        A container's health check of this host's tollgate serve
  help          This help; help COMMAND: the command's

Each command has its own help: tollgate <command> --help

Options:
  -h, --help     Show this help
  -v, --version  Show the version
`;

/** The commands whose help is generated here (check, rules, keys, usage and health carry their own). */
export const COMMAND_HELP = {
  serve: {
    command: 'serve',
    synopsis: '[flags]',
    summary: `Runs the decision service: HTTP JSON on --port, envoy's gRPC on --grpc-port, and the dashboard,
/metrics, /v1/events and the admin API on --admin-port (docs/service.md). Runs until SIGTERM or
SIGINT, then drains (--drain-delay) and stops. Durations (D) take their unit: 500ms, 30s, 5m.`,
    flags: Object.keys(SERVE_FLAGS),
    env: SERVE_FLAGS,
    text: SERVICE_FLAG_TEXT,
    footer: 'Exit codes: 0 stopped by a signal, 1 failed to start, 2 a bad flag or setting (nothing started).',
  },
  gateway: {
    command: 'gateway',
    synopsis: '--config FILE [flags]',
    summary: `A reverse proxy that rate limits, then forwards (docs/gateway.md). Configuration errors are
printed as file:line:col. Runs until SIGTERM or SIGINT, then drains and stops.`,
    flags: Object.keys(GATEWAY_FLAGS),
    env: GATEWAY_FLAGS,
    text: GATEWAY_FLAG_TEXT,
    footer: 'Exit codes: 0 stopped by a signal, 1 failed to start, 2 a bad flag or configuration.',
  },
  validate: {
    command: 'validate',
    synopsis: 'PATH [flags]',
    summary: `Checks a rules file, or a directory of *.yaml/*.json files: prints "OK: N domains, M descriptors",
or every error as file:line:col: path: message.`,
    flags: Object.keys(VALIDATE_FLAG_TEXT),
    env: { 'merge-domains': SERVE_FLAGS['merge-domains']! },
    text: VALIDATE_FLAG_TEXT,
    footer: 'Exit codes: 0 valid, 1 errors (on stderr), 2 misuse.',
  },
  simulate: {
    command: 'simulate',
    synopsis: '--rules DIR|FILE --log FILE [flags]',
    summary: `Replays an access log against rules offline, with the real algorithms and the log's own times,
and reports per limit: allowed, throttled, busiest keys, when (docs/simulate.md).`,
    flags: Object.keys(SIMULATE_FLAGS),
    text: SIMULATE_FLAG_TEXT,
    footer: 'Exit codes: 0 replayed, 1 the log could not be read, 2 bad flags, rules or mapping.',
  },
  replicate: {
    command: 'replicate',
    synopsis: '--region NAME --redis URL --peer NAME=URL... [flags]',
    summary: "Carries one region's counts to the other regions' Redis (multi-region, docs/scaling.md).",
    flags: Object.keys(REPLICATE_FLAGS),
    text: REPLICATE_FLAG_TEXT,
    footer: 'Exit codes: 0 stopped by a signal, 1 its Redis unreachable, 2 bad flags.',
  },
  demo: {
    command: 'demo',
    synopsis: '',
    summary: 'Shows every algorithm deciding a burst of requests on the embedded memory store.',
    flags: [],
    text: {},
  },
} as const satisfies Record<string, CommandHelp>;

export type HelpedCommand = keyof typeof COMMAND_HELP;

/** `tollgate COMMAND --help`'s text. */
export function commandHelp(command: HelpedCommand): string {
  return renderCommandHelp(COMMAND_HELP[command]);
}
