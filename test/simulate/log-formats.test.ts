/**
 * Reading access logs: Common and Combined Log Format and JSON lines, each parsed into the fields
 * the mapping names; the format detected from the first line; malformed lines counted with the
 * line numbers of the first few, or (strict) an error naming the line.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidLogError } from '../../src/errors.js';
import { jsonFieldMap, readAccessLog, type LogEntry, type ReadLogOptions } from '../../src/simulate/index.js';

const dir = mkdtempSync(join(tmpdir(), 'tollgate-logs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

async function read(text: string, options: Partial<ReadLogOptions> = {}) {
  const file = join(dir, `log-${files++}.log`);
  writeFileSync(file, text);
  const log = readAccessLog(file, { jsonFields: jsonFieldMap(), ...options });
  const entries: LogEntry[] = [];
  for await (const batch of log.entries) entries.push(...batch);
  return { entries, stats: log.stats, file };
}

const CLF = '203.0.113.7 - alice [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?x=1 HTTP/1.0" 200 2326';
const COMBINED = `${CLF} "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"`;

describe('Common Log Format', () => {
  it('parses every field, the time with its offset, and a dash as absent', async () => {
    const { entries, stats } = await read(`${CLF}\n192.0.2.1 - - [10/Oct/2000:20:55:37 +0000] "POST /login HTTP/1.1" 401 -\n`);
    expect(stats).toMatchObject({ format: 'clf', lines: 2, parsed: 2, malformed: 0 });
    expect(entries[0]).toEqual({
      time: Date.UTC(2000, 9, 10, 20, 55, 36),
      line: 1,
      fields: { ip: '203.0.113.7', ident: undefined, user: 'alice', method: 'GET', url: '/apache_pb.gif?x=1', path: '/apache_pb.gif', query: 'x=1', protocol: 'HTTP/1.0', status: '200', bytes: '2326' },
    });
    expect(entries[1]!.time - entries[0]!.time).toBe(1_000);
    expect(entries[1]!.fields).toMatchObject({ ip: '192.0.2.1', user: undefined, method: 'POST', path: '/login', bytes: undefined });
  });

  it('refuses a Combined line in a log given as clf', async () => {
    const { stats } = await read(`${CLF}\n${COMBINED}\n`, { format: 'clf' });
    expect(stats.problems).toEqual([{ line: 2, reason: 'a Combined Log Format line in a Common log (use --format combined)' }]);
  });
});

describe('Combined Log Format', () => {
  it('is detected from the first line and adds the referer and the user agent (with escaped quotes)', async () => {
    const agent = `${CLF} "-" "curl \\"quoted\\" 8.5"`;
    const { entries, stats } = await read(`${COMBINED}\n${agent}\n`);
    expect(stats.format).toBe('combined');
    expect(entries[0]!.fields).toMatchObject({ ip: '203.0.113.7', referer: 'http://www.example.com/start.html', user_agent: 'Mozilla/4.08 [en] (Win98; I ;Nav)' });
    expect(entries[1]!.fields).toMatchObject({ referer: undefined, user_agent: 'curl "quoted" 8.5' });
  });
});

describe('JSON lines', () => {
  it('reads ISO times, epoch seconds and epoch milliseconds, and headers as header.NAME', async () => {
    const lines = [
      { time: '2026-11-27T10:00:00.250Z', ip: '203.0.113.7', method: 'GET', path: '/a?b=1', status: 200, headers: { 'X-Api-Key': 'k_1' } },
      { time: 1_795_000_000, ip: '203.0.113.8' },
      { time: '1795000000123', ip: '203.0.113.9' },
    ];
    const { entries, stats } = await read(lines.map((line) => JSON.stringify(line)).join('\n'));
    expect(stats).toMatchObject({ format: 'jsonl', parsed: 3, malformed: 0 });
    expect(entries.map((entry) => entry.time)).toEqual([Date.UTC(2026, 10, 27, 10, 0, 0, 250), 1_795_000_000_000, 1_795_000_000_123]);
    expect(entries[0]!.fields).toMatchObject({ ip: '203.0.113.7', method: 'GET', path: '/a', query: 'b=1', url: '/a?b=1', status: '200', 'header.x-api-key': 'k_1' });
  });

  it('reads a file with a byte order mark and Windows line ends', async () => {
    const { entries, stats } = await read('\uFEFF{"time": 1795000000, "ip": "a"}\r\n{"time": 1795000001, "ip": "b"}\r\n');
    expect(stats).toMatchObject({ format: 'jsonl', lines: 2, parsed: 2, malformed: 0 });
    expect(entries.map((entry) => entry.fields.ip)).toEqual(['a', 'b']);
  });

  it('reads fields from the members --field names, nested ones too', async () => {
    const line = { ts: 1_795_000_000_000, client: { address: '198.51.100.1' }, tenant: 'acme' };
    const { entries } = await read(JSON.stringify(line), { jsonFields: jsonFieldMap(['time=ts', 'ip=client.address', 'tenant=tenant']) });
    expect(entries[0]).toMatchObject({ time: 1_795_000_000_000, fields: { ip: '198.51.100.1', tenant: 'acme' } });
  });

  it('refuses a malformed --field', () => {
    expect(() => jsonFieldMap(['ip'])).toThrow(/--field must be NAME=MEMBER .* got "ip"/);
    expect(() => jsonFieldMap(['url=x'])).toThrow(/not query or url/);
  });
});

describe('malformed lines', () => {
  const good = (second: number) => `203.0.113.7 - - [10/Oct/2000:13:55:${String(second).padStart(2, '0')} +0000] "GET / HTTP/1.1" 200 1`;

  it('are counted, skipped, and the first five named with their line numbers and what is wrong', async () => {
    const lines = [good(0), 'garbage', good(1), '', '203.0.113.7 - - [10/Oct/2000:13:55:99 +0000] "GET / HTTP/1.1" 200 1', ...Array.from({ length: 6 }, () => 'x'), good(2)];
    const { entries, stats } = await read(`${lines.join('\n')}\n`);
    expect(entries.map((entry) => entry.line)).toEqual([1, 3, 12]);
    expect(stats).toMatchObject({ lines: 12, parsed: 3, malformed: 8 });
    expect(stats.problems).toEqual([
      { line: 2, reason: 'not a Common/Combined Log Format line (ip ident user [time] "request" status bytes)' },
      { line: 5, reason: 'time [10/Oct/2000:13:55:99 +0000] is not dd/Mon/yyyy:hh:mm:ss ±hhmm' },
      { line: 6, reason: expect.stringMatching(/^not a Common/) },
      { line: 7, reason: expect.stringMatching(/^not a Common/) },
      { line: 8, reason: expect.stringMatching(/^not a Common/) },
    ]);
  });

  it('in JSON lines say why: not JSON, not an object, no time', async () => {
    const { stats } = await read(['{"time": 1795000000}', '{"time":', '[1]', '{"ip": "a"}', '{"time": "yesterday"}'].join('\n'));
    expect(stats.problems.map((problem) => [problem.line, problem.reason.replace(/: .*/, ':')])).toEqual([
      [2, 'not JSON:'],
      [3, 'not a JSON object'],
      [4, 'no time member (name it with --field time=MEMBER)'],
      [5, 'time "yesterday" is not an ISO 8601 time or epoch seconds / ms'],
    ]);
  });

  it('stop a strict read at the first one, with an error naming the file and line', async () => {
    const file = join(dir, 'strict.log');
    writeFileSync(file, `${good(0)}\n${good(1)}\nbroken line\n${good(2)}\n`);
    const log = readAccessLog(file, { jsonFields: jsonFieldMap(), strict: true });
    const seen: number[] = [];
    const reading = (async () => {
      for await (const batch of log.entries) seen.push(...batch.map((entry) => entry.line!));
    })();
    await expect(reading).rejects.toThrow(InvalidLogError);
    await expect(reading).rejects.toThrow(`${file}:3: not a Common/Combined Log Format line`);
    expect(seen).toEqual([1, 2]);
  });

  it('a missing log file is an error naming it', () => {
    expect(() => readAccessLog(join(dir, 'nope.log'), { jsonFields: jsonFieldMap() })).toThrow(/--log ".*nope\.log" cannot be read \(no such file or directory/);
  });
});
