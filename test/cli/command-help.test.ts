/**
 * Each command's `--help` is generated from the flag table its parser reads, so it lists every
 * flag with its environment variable and default; an unknown flag is a short error with the
 * closest flag. A couple of runs as real processes (`node dist/cli/main.js`: build first).
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { COMMAND_HELP, commandHelp, type HelpedCommand } from '../../src/cli/command-help.js';
import { flagErrorText } from '../../src/cli/admin/output.js';
import type { CommandHelp } from '../../src/cli/usage.js';
import { InvalidOptionError } from '../../src/errors.js';
import { resolveServiceOptions } from '../../src/service/options.js';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;

function tollgate(...args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000 });
}

describe('a command\'s help', () => {
  it.each(Object.keys(COMMAND_HELP) as HelpedCommand[])('%s: every flag its parser takes has its line, with its variable and a text', (command) => {
    const spec: CommandHelp = COMMAND_HELP[command];
    const help = commandHelp(command);
    expect(help).toMatch(new RegExp(`^Usage: tollgate ${command} `));
    for (const flag of spec.flags) {
      expect(spec.text[flag]?.text, `--${flag} has no help text`).toBeTruthy();
      const line = help.split('\n').findIndex((text) => text.startsWith(`  --${flag} `) || text === `  --${flag}`);
      expect(line, `--${flag} is not in the help`).toBeGreaterThan(0);
      const env = spec.env?.[flag];
      if (env !== undefined) expect(help.split('\n').slice(line, line + 2).join('\n')).toContain(env);
    }
  });

  it('serve lists --local-cache-keys with its default and variable, and the defaults of the ports', () => {
    const help = commandHelp('serve');
    expect(help).toMatch(/^ {2}--local-cache-keys N +.*\[default 100000; TOLLGATE_LOCAL_CACHE_KEYS\]$/m);
    expect(help).toMatch(/^ {2}--port N +.*\[default 8080; TOLLGATE_PORT\]$/m);
    expect(help).toMatch(/^ {2}--grpc-port N +.*\[default 8081; TOLLGATE_GRPC_PORT\]$/m);
  });
});

describe('an unknown flag', () => {
  it('names the closest flag when one is close, and where the help is', () => {
    const error = new TypeError("Unknown option '--confg'. To specify a positional argument starting with a '-', place it at the end of the command after '--', as in '-- \"--confg\"");
    expect(flagErrorText('serve', error, ['config', 'redis'])).toBe('tollgate serve: unknown flag --confg (did you mean --config?)\nsee tollgate serve --help\n');
    expect(flagErrorText('serve', new TypeError("Unknown option '--zzzzzz'. To specify ..."), ['config', 'redis'])).toBe('tollgate serve: unknown flag --zzzzzz\nsee tollgate serve --help\n');
  });

  it('tollgate serve --confg: two lines on stderr, exit 2 (was "Unknown option" and the whole global help)', () => {
    const result = tollgate('serve', '--confg', 'rules.yaml');
    expect([result.status, result.stdout, result.stderr]).toEqual([2, '', 'tollgate serve: unknown flag --confg (did you mean --config?)\nsee tollgate serve --help\n']);
  });
});

describe('ports given twice', () => {
  it('serve --port N --grpc-port N is refused before anything listens, naming both flags (exit 2)', () => {
    const result = tollgate('serve', '--port', '18123', '--grpc-port', '18123', '--admin-port', '0');
    expect(result.status).toBe(2);
    expect(result.stderr).toBe('tollgate serve: --port (or TOLLGATE_PORT) and --grpc-port (or TOLLGATE_GRPC_PORT) are both 18123: HTTP and gRPC listen apart, give each its own port (defaults 8080 and 8081)\n');
    expect(result.stderr).not.toContain('EADDRINUSE');
  });

  it('--admin-port equal to --port or --grpc-port is refused too; 0 (a free port each) is not a clash', () => {
    expect(() => resolveServiceOptions({ port: '9100', 'admin-port': '9100' }, {})).toThrow(new InvalidOptionError('--admin-port (or TOLLGATE_ADMIN_PORT) is 9100, the same port as --port (or TOLLGATE_PORT): the admin listener needs a port of its own (default 6070)'));
    expect(() => resolveServiceOptions({ 'grpc-port': '9100', 'admin-port': '9100' }, {})).toThrow(/--admin-port \(or TOLLGATE_ADMIN_PORT\) is 9100, the same port as --grpc-port/);
    expect(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0' }, {})).toMatchObject({ port: 0, grpcPort: 0, adminPort: 0 });
  });
});
