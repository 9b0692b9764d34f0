/**
 * `tollgate simulate` on the example of docs/simulate.md: the table, `--json`, `--algorithm` side
 * by side with `--compare-to`, malformed lines (a warning and exit 0; `--strict` exit 1), and every
 * kind of bad flag answered with exit 2 and a message saying what to fix. A few runs are real
 * processes (the built bin under plain `node`; `npm test` builds dist/ first); the rest run the
 * command in this process (each process start costs about a second on a loaded machine).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runSimulateCommand } from '../../src/simulate/command.js';

const root = new URL('../..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
const RULES = 'examples/simulate/rules.yaml';
const LOG = 'examples/simulate/access.log';
const MAP = 'examples/simulate/map.yaml';
const dir = mkdtempSync(join(tmpdir(), 'tollgate-simulate-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The command as a process: `tollgate simulate ARGS`. */
function tollgate(...args: string[]) {
  return spawnSync(process.execPath, [pkg.bin.tollgate!, 'simulate', ...args], { cwd: root, encoding: 'utf8', timeout: 30_000 });
}

/** The command in this process, as `tollgate simulate ARGS` would run it (paths from the repository root). */
async function simulateHere(...args: string[]) {
  let stdout = '';
  let stderr = '';
  const absolute = args.map((arg) => (/^(examples|test)\//.test(arg) ? join(root, arg) : arg));
  const status = await runSimulateCommand(absolute, { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: (text: string) => (stderr += text) } }, 'Usage: tollgate <command>\n');
  const relative = (text: string) => text.replaceAll(root, '');
  return { status, stdout: relative(stdout), stderr: relative(stderr) };
}

describe('tollgate simulate', () => {
  it('prints a table per limit, the busiest keys and when throttling happened', () => {
    const result = tollgate('--rules', RULES, '--log', LOG, '--map', MAP);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toBe(`${LOG}: 99 lines, combined format, 99 parsed`);
    expect(lines).toContain('api.remote_address  5 per second  fixed-window        99       87         12  12.1%');
    expect(lines).toContain('api.login_user      3 per minute  sliding-log          7        5          2  28.6%');
    expect(result.stdout).toMatch(/most throttled: api\|remote_address=203\.0\.113\.9 12\n/);
    expect(result.stdout).not.toContain('\u001b['); // no colours when stdout is not a terminal
  });

  it('--json gives the report as data', async () => {
    const result = await simulateHere('--rules', RULES, '--log', LOG, '--map', MAP, '--json', '--top', '2');
    expect(result.status).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(Object.keys(report)).toEqual(['log', 'entries', 'unmapped', 'outOfOrder', 'start', 'end', 'runs']);
    expect(report.log).toEqual({ file: LOG, format: 'combined', lines: 99, parsed: 99, malformed: 0, problems: [] });
    expect(report.runs).toHaveLength(1);
    const [perIp, login] = report.runs[0].rules;
    expect(Object.keys(perIp)).toEqual(['rule', 'domain', 'limit', 'algorithm', 'shadowMode', 'requests', 'allowed', 'throttled', 'keys', 'topByRequests', 'topByThrottled', 'timeline']);
    expect(perIp.topByRequests).toEqual([
      { key: 'api|remote_address=198.51.100.7', count: 60, error: 0 },
      { key: 'api|remote_address=203.0.113.9', count: 32, error: 0 },
    ]);
    expect(perIp.timeline).toEqual({
      bucketMs: 60_000,
      buckets: [
        { start: Date.UTC(2026, 10, 27, 10, 0), allowed: 45, throttled: 6 },
        { start: Date.UTC(2026, 10, 27, 10, 1), allowed: 42, throttled: 6 },
      ],
    });
    expect(login).toMatchObject({ rule: 'api.login_user', requests: 7, allowed: 5, throttled: 2 });
  });

  it('--algorithm replays once per algorithm and --compare-to counts the decisions that differ', async () => {
    const result = await simulateHere('--rules', RULES, '--log', LOG, '--map', MAP, '--algorithm', 'fixed-window,sliding-window', '--compare-to', 'sliding-log', '--json');
    expect(result.status).toBe(0);
    const report = JSON.parse(result.stdout);
    const login = report.runs.map((run: { algorithm: string; rules: { rule: string; allowed: number; difference: unknown }[] }) => {
      const rule = run.rules.find((r) => r.rule === 'api.login_user')!;
      return [run.algorithm, rule.allowed, rule.difference];
    });
    expect(login).toEqual([
      ['fixed-window', 5, { compared: 7, allowedOnlyHere: 0, allowedOnlyByReference: 0 }],
      ['sliding-window', 4, { compared: 7, allowedOnlyHere: 0, allowedOnlyByReference: 1 }],
    ]);
    const table = await simulateHere('--rules', RULES, '--log', LOG, '--map', MAP, '--algorithm', 'fixed-window,sliding-window', '--compare-to', 'sliding-log');
    expect(table.stdout).toContain('api.login_user      3 per minute  sliding-window         7        4          3  42.9%                                    0 / 1');
  });

  it('maps lines with --domain and --descriptor and writes an HTML report with --html', async () => {
    const html = join(dir, 'report.html');
    const result = await simulateHere('--rules', RULES, '--log', LOG, '--domain', 'api', '--descriptor', 'remote_address=ip', '--html', html);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('api.remote_address  5 per second  fixed-window        99       87         12');
    expect(readFileSync(html, 'utf8')).toMatch(/^<!doctype html>[^]*data-rule="api.remote_address"/);
  });

  it('skips malformed lines with a warning naming the first, and exits 0; --strict exits 1 at the first', () => {
    const log = join(dir, 'some-bad.log');
    const lines = readFileSync(join(root, LOG), 'utf8').split('\n');
    lines.splice(3, 0, 'not a log line');
    writeFileSync(log, lines.join('\n'));
    const result = tollgate('--rules', RULES, '--log', log, '--map', MAP);
    expect(result.status).toBe(0);
    expect(result.stderr).toBe(`tollgate simulate: warning: 1 of 100 lines are not combined lines and were skipped; the first:\n  line 4: not a Common/Combined Log Format line (ip ident user [time] "request" status bytes)\n`);
    expect(result.stdout).toMatch(/100 lines, combined format, 99 parsed, 1 malformed \(line 4: /);
    const strict = tollgate('--rules', RULES, '--log', log, '--map', MAP, '--strict');
    expect(strict.status).toBe(1);
    expect(strict.stderr).toBe(`tollgate simulate: ${log}:4: not a Common/Combined Log Format line (ip ident user [time] "request" status bytes) (--strict stops at the first malformed line)\n`);
    expect(strict.stdout).toBe('');
  });

  it('exits 1 when no line is in the format', async () => {
    const log = join(dir, 'all-bad.log');
    writeFileSync(log, 'one\ntwo\n');
    const result = await simulateHere('--rules', RULES, '--log', log);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/no line of .*all-bad\.log could be read as a clf log/);
  });

  it.each([
    ['no --rules', ['--log', LOG], /simulate: --rules DIR\|FILE is required/],
    ['no --log', ['--rules', RULES], /simulate: --log FILE is required/],
    ['a missing log', ['--rules', RULES, '--log', 'no/such.log'], /simulate: --log "no\/such.log" cannot be read \(ENOENT\)/],
    ['an unknown format', ['--rules', RULES, '--log', LOG, '--format', 'apache'], /--format must be one of clf, combined, jsonl, got "apache"/],
    ['an unknown field', ['--rules', RULES, '--log', LOG, '--descriptor', 'remote_address=client_ip'], /descriptor remote_address=client_ip: unknown log field "client_ip"; a combined log has ip, ident, user, method, path/],
    ['a misspelt field', ['--rules', RULES, '--log', LOG, '--descriptor', 'remote_address=ipp'], /unknown log field "ipp" \(did you mean "ip"\?\)/],
    ['a descriptor without a field', ['--rules', RULES, '--log', LOG, '--descriptor', 'remote_address'], /--descriptor must be KEY=FIELD/],
    ['an unknown domain', ['--rules', RULES, '--log', LOG, '--domain', 'apii'], /the rules have no domain "apii"; they have api/],
    ['an unknown algorithm', ['--rules', RULES, '--log', LOG, '--algorithm', 'fixed-window,leaky'], /--algorithm "leaky" is not one of token-bucket/],
    ['an unknown reference', ['--rules', RULES, '--log', LOG, '--compare-to', 'exact'], /--compare-to "exact" is not one of/],
    ['a bad --top', ['--rules', RULES, '--log', LOG, '--top', '0'], /--top must be a whole number from 1 to 1000, got "0"/],
    ['--field on a non-JSON log', ['--rules', RULES, '--log', LOG, '--field', 'ip=addr'], /--field applies to JSON-lines logs only; this log is combined/],
    ['--map with --descriptor', ['--rules', RULES, '--log', LOG, '--map', MAP, '--descriptor', 'a=ip'], /give either --map FILE or --domain \/ --descriptor, not both/],
    ['invalid rules', ['--rules', 'test/rules/fixtures/invalid/several-errors.yaml', '--log', LOG], /simulate: --rules: test\/rules\/fixtures\/invalid\/several-errors.yaml:5:13: descriptors\[0\].rate_limit.unit/],
    ['an --html file in no directory', ['--rules', RULES, '--log', LOG, '--html', 'no/such/dir/report.html'], /--html "no\/such\/dir\/report.html": the directory no\/such\/dir does not exist/],
    ['an unknown flag', ['--rules', RULES, '--log', LOG, '--colour'], /simulate: Unknown option '--colour'/],
  ])('exits 2 on %s, saying what to fix', async (_case, args, message) => {
    const result = await simulateHere(...(args as string[]));
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
    expect(result.stderr).toMatch(/\nUsage: tollgate <command>/);
    expect(result.status).toBe(2);
  });

  it('exits 2 on a mapping file with a mistake, naming where', async () => {
    const map = join(dir, 'bad-map.yaml');
    writeFileSync(map, 'requests:\n  - domain: api\n    descriptors:\n      - entries: [{ key: remote_address, field: ip, value: x }]\n');
    const result = await simulateHere('--rules', RULES, '--log', LOG, '--map', map);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(`simulate: ${map}: requests[0].descriptors[0].entries[0]: give exactly one of field (a log field, e.g. ip) and value (a literal)`);
  });

  it('on a terminal: a progress bar on stderr, colours on stdout (none with NO_COLOR)', async () => {
    const run = async () => {
      let stdout = '';
      let stderr = '';
      const status = await runSimulateCommand(
        ['--rules', join(root, RULES), '--log', join(root, LOG), '--map', join(root, MAP)],
        { stdout: { isTTY: true, write: (text: string) => (stdout += text) }, stderr: { isTTY: true, write: (text: string) => (stderr += text) } },
        '',
      );
      return { status, stdout, stderr };
    };
    const saved = process.env.NO_COLOR;
    delete process.env.NO_COLOR;
    try {
      const coloured = await run();
      expect(coloured.status).toBe(0);
      // The bar at 100% of the file (small: 0.0 MB), then erased before the report.
      expect(coloured.stderr).toBe(`\r[${'#'.repeat(30)}] 100%  0.0 / 0.0 MB\r\u001b[K`);
      expect(coloured.stdout).toContain('\u001b[31m14 throttled\u001b[0m');
      process.env.NO_COLOR = '1';
      expect((await run()).stdout).not.toContain('\u001b[');
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = saved;
    }
  });

  it('simulate --help prints its own usage, every simulate flag; an unknown flag gets the closest one (exit 2)', () => {
    const result = tollgate('--help');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^Usage: tollgate simulate --rules DIR\|FILE --log FILE \[flags\]\n[^]*\n {2}--compare-to A +count per limit/);
    expect(result.stdout).not.toContain('tollgate serve');
    const typo = tollgate('--rules', RULES, '--logs', LOG);
    expect([typo.status, typo.stderr]).toEqual([2, 'tollgate simulate: unknown flag --logs (did you mean --log?)\nsee tollgate simulate --help\n']);
  });
});
