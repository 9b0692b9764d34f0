/**
 * The commands that talk to a running service over its HTTP API: `tollgate check`, `tollgate rules
 * get|push|diff`, `tollgate keys ...`, `tollgate usage`. Exit codes shared by all: 0 done, 1 a "no" answer (OVER_LIMIT,
 * a diff with changes), 2 bad flags or invalid rules (nothing sent), 3 the service unreachable or
 * answering an error (its message printed); check and usage: 4 an unknown domain.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AdminApiError, InvalidOptionError, TollgateError } from '../../errors.js';
import { CHECK_FLAGS, CHECK_HELP, runCheck } from './check.js';
import { CONNECTION_FLAGS, DEFAULT_URL, DEFAULT_ADMIN_URL, resolveConnection, type Connection } from './connection.js';
import { KEYS_FLAGS, KEYS_HELP, runKeys } from './keys.js';
import { flagErrorText, type CommandOutput } from './output.js';
import { OVERRIDES_FLAGS, OVERRIDES_HELP, runOverridesDelete, runOverridesGet, runOverridesPut } from './overrides.js';
import { RULES_FLAGS, RULES_HELP, runRulesDiff, runRulesGet, runRulesPush } from './rules.js';
import { USAGE_FLAGS, USAGE_HELP, runUsage } from './usage-command.js';
import { USAGE_EXPORT_FLAGS, USAGE_EXPORT_HELP, runUsageExport } from './usage-export.js';

export type { CommandOutput } from './output.js';

import type { AdminCommand } from './commands.js';

export { ADMIN_COMMANDS, type AdminCommand } from './commands.js';

const COMMON_HELP = `
Options (every command):
  --url URL          check: the decision listener (${DEFAULT_URL}; or TOLLGATE_URL);
                     rules, keys, usage, overrides: the admin listener (${DEFAULT_ADMIN_URL}; or
                     TOLLGATE_ADMIN_URL)
  --token-file FILE  a file holding the admin token (else TOLLGATE_ADMIN_TOKEN); --token is
                     refused: the command line shows in \`ps\`
  --json             the service's answer as JSON
  --timeout D        longest wait for an answer, with its unit: 300ms, 5s (5s; at most 10m)
  -h, --help         this help
`;

const COMMANDS: Record<AdminCommand, { flags: ParseArgsConfig['options']; help: string }> = {
  check: { flags: CHECK_FLAGS, help: CHECK_HELP },
  rules: { flags: RULES_FLAGS, help: RULES_HELP },
  keys: { flags: KEYS_FLAGS, help: KEYS_HELP },
  usage: { flags: { ...USAGE_FLAGS, ...USAGE_EXPORT_FLAGS }, help: USAGE_HELP + '\n' + USAGE_EXPORT_HELP },
  overrides: { flags: OVERRIDES_FLAGS, help: OVERRIDES_HELP },
};

/** Runs `command` with `args`; resolves with the exit code (never rejects for bad input or a failing service). */
export async function runAdminCommand(command: AdminCommand, args: readonly string[], output: CommandOutput, env: NodeJS.ProcessEnv = process.env, stdin: () => Promise<string> = readStdin): Promise<number> {
  const { flags, help } = COMMANDS[command];
  try {
    const parsed = parseArgs({ args: [...args], options: { ...CONNECTION_FLAGS, ...flags } as ParseArgsConfig['options'], allowPositionals: true, strict: true });
    const values = parsed.values as Record<string, unknown>;
    const positionals = parsed.positionals;
    if (values.help === true) {
      output.stdout(help + COMMON_HELP);
      return 0;
    }
    const connection = resolveConnection(values, env, command === 'check' ? 'decisions' : 'admin');
    // check's --url is the decision listener; the admin listener is TOLLGATE_ADMIN_URL's (or the default).
    const admin = (): Connection => resolveConnection({ ...values, url: undefined }, env, 'admin');
    return await dispatch(command, positionals, values, { connection, admin, stdin }, output);
  } catch (error) {
    return report(command, error, output);
  }
}

/** The flags of each command and action, besides the connection flags. */
const ACTION_FLAGS: Readonly<Record<string, readonly string[]>> = {
  check: Object.keys(CHECK_FLAGS),
  'rules get': Object.keys(RULES_FLAGS),
  'rules push': [],
  'rules diff': [],
  'keys inspect': ['key', 'algorithm', 'limit', 'window', 'precision'],
  'keys reset': ['key', 'algorithm', 'limit', 'window', 'precision'],
  'keys block': ['key', 'for', 'domain'],
  'keys unblock': ['key', 'domain'],
  'keys blocked': [],
  usage: Object.keys(USAGE_FLAGS),
  'overrides get': ['domain'],
  'overrides put': [],
  'overrides delete': Object.keys(OVERRIDES_FLAGS),
  'usage export': Object.keys(USAGE_EXPORT_FLAGS),
};

/** The commands that take flags only, no action word. */
type FlagsOnly = 'check' | 'usage';
const FLAGS_ONLY: readonly AdminCommand[] = ['check', 'usage'];

const ACTIONS: Readonly<Record<Exclude<AdminCommand, FlagsOnly>, string>> = { rules: 'get, push or diff', keys: 'inspect, reset, block, unblock or blocked', overrides: 'get, put or delete' };

/** Refuses an unknown action, and a flag the action does not use (it would be silently ignored). */
function checkActionFlags(command: AdminCommand, action: string | undefined, values: Record<string, unknown>): void {
  const name = FLAGS_ONLY.includes(command) && action === undefined ? command : `${command} ${action ?? ''}`;
  const allowed = ACTION_FLAGS[name];
  if (allowed === undefined) throw new InvalidOptionError(`${command} takes ${ACTIONS[command as Exclude<AdminCommand, FlagsOnly>]}, got ${JSON.stringify(action ?? '')}`);
  for (const flag of Object.keys(values)) {
    if (!(flag in CONNECTION_FLAGS) && !allowed.includes(flag)) throw new InvalidOptionError(`--${flag} is not a flag of ${name}${allowed.length > 0 ? ` (its flags: ${allowed.map((known) => `--${known}`).join(', ')})` : ''}`);
  }
}

function dispatch(command: AdminCommand, positionals: string[], values: Record<string, unknown>, { connection, admin, stdin }: { connection: Connection; admin: () => Connection; stdin: () => Promise<string> }, output: CommandOutput): Promise<number> {
  const [action, ...rest] = positionals;
  if (command === 'usage' && action === 'export') {
    if (rest.length > 0) throw new InvalidOptionError(`usage export takes flags only, got ${JSON.stringify(rest.join(' '))}`);
    checkActionFlags(command, action, values);
    return runUsageExport(connection, values, output);
  }
  if (FLAGS_ONLY.includes(command)) {
    if (positionals.length > 0) throw new InvalidOptionError(`${command} takes no arguments besides its flags, got ${JSON.stringify(positionals.join(' '))}`);
    checkActionFlags(command, undefined, values);
    return command === 'check' ? runCheck(connection, values, output, admin) : runUsage(connection, values, output);
  }
  checkActionFlags(command, action, values);
  if (command === 'keys') {
    if (rest.length > 0) throw new InvalidOptionError(`keys ${action ?? ''} takes flags only, got ${JSON.stringify(rest.join(' '))}`);
    return runKeys(connection, action, values, output);
  }
  if (command === 'overrides') {
    if (action === 'get') return runOverridesGet(connection, values, rest, output);
    return action === 'put' ? runOverridesPut(connection, rest, output, stdin) : runOverridesDelete(connection, values, rest, output);
  }
  if (action === 'get') return runRulesGet(connection, values, rest, output);
  return action === 'push' ? runRulesPush(connection, rest, output) : runRulesDiff(connection, rest, output);
}

/** 3 when the service failed us, 2 for what the user gave (flags, arguments, policy values). */
function report(command: AdminCommand, error: unknown, output: CommandOutput): number {
  if (error instanceof AdminApiError) {
    output.stderr(`tollgate ${command}: ${error.message}\n`);
    return 3;
  }
  if (error instanceof TypeError && (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS') === true) {
    output.stderr(flagErrorText(command, error, Object.keys({ ...CONNECTION_FLAGS, ...COMMANDS[command].flags })));
    return 2;
  }
  if (!(error instanceof TollgateError)) throw error;
  output.stderr(`tollgate ${command}: ${error.message}\nsee tollgate ${command} --help\n`);
  return 2;
}

/** Standard input, whole (`overrides put -`). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
