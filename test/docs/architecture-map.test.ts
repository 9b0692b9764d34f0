/**
 * docs/architecture.md is the map a newcomer reads first: every file and folder it names exists,
 * its table of rooms names every folder of src/, and from it alone a newcomer finds the file that
 * decides a check's failure mode, the file that frames a gRPC message and the file that retries a
 * deferred delivery (each file's own header says it does).
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LAYERS } from '../support/layers.js';

const ROOT = resolve(import.meta.dirname, '../..');
const MAP = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');

/** Every `src/…` or `test/…` path the page names in code spans (globs and placeholders left out). */
function namedPaths(): string[] {
  const paths = new Set<string>();
  for (const [, span] of MAP.matchAll(/`([^`\s]+)`/g)) {
    if (!/^(src|test)\//.test(span!) || /[*<>]/.test(span!)) continue;
    paths.add(span!.replace(/\/$/, ''));
  }
  return [...paths];
}

function sourceFolders(dir = join(ROOT, 'src')): string[] {
  const here = readdirSync(dir).some((name) => name.endsWith('.ts')) ? [relative(ROOT, dir)] : [];
  return here.concat(
    readdirSync(dir)
      .map((name) => join(dir, name))
      .filter((path) => statSync(path).isDirectory())
      .flatMap((path) => sourceFolders(path)),
  );
}

/** The rows of "To change X, open Y": [what to change, where]. */
function changeTable(): [string, string][] {
  const section = MAP.slice(MAP.indexOf('## To change X, open Y'));
  return [...section.matchAll(/^\| ([^|]+) \| (.+) \|$/gm)].map((row) => [row[1]!, row[2]!] as [string, string]).filter(([what]) => !/^(to…|---)/.test(what));
}

/** The first file the row for `question` names, and that file's header comment. */
function answer(question: RegExp): { file: string; header: string } {
  const row = changeTable().find(([what]) => question.test(what));
  expect(row, `a row of "To change X, open Y" answers ${question}`).toBeDefined();
  const file = /`(src\/[^`]+\.ts)`/.exec(row![1])![1]!;
  const text = readFileSync(join(ROOT, file), 'utf8');
  return { file, header: text.slice(0, text.indexOf('*/')) };
}

describe('docs/architecture.md', () => {
  it('names only files and folders that exist', () => {
    const paths = namedPaths();
    expect(paths.length).toBeGreaterThan(40);
    expect(paths.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it("has the architecture test's layers in its layer table, in order", () => {
    const table = MAP.slice(MAP.indexOf('## The layers'), MAP.indexOf("## The engine's layers"));
    const rows = [...table.matchAll(/^\| [^|]+ \| [^|]+ \| ([^|]+) \|/gm)].slice(2);
    // `errors.ts` is the module errors, `client/` every module under client/; notes in brackets are prose.
    const documented = rows.map((row) => [...row[1]!.replace(/\(.*?\)/g, '').matchAll(/`([^`]+)`/g)].map((name) => name[1]!.replace(/\.ts$/, '')));
    expect(documented).toEqual(LAYERS.map((layer) => [...layer]));
  });

  it('has a row in its table of rooms for every folder of src/', () => {
    const rooms = new Set([...MAP.matchAll(/^\| `(src\/[^`]*)`/gm)].map((row) => row[1]!.replace(/\/$/, '').replace(/ \(root\)$/, '')));
    const missing = sourceFolders().filter((folder) => !rooms.has(folder) && folder !== 'src');
    expect(missing).toEqual([]);
  });

  it("leads a newcomer to the file that decides a check's failure mode", () => {
    const { file, header } = answer(/failure mode/);
    expect(file).toBe('src/limiter/guard-layer.ts');
    expect(header).toMatch(/failure mode/);
  });

  it('leads a newcomer to the file that frames a gRPC message', () => {
    const { file, header } = answer(/gRPC message/);
    expect(file).toBe('src/service/grpc/framing.ts');
    expect(header).toMatch(/framed/);
  });

  it('leads a newcomer to the file that retries a deferred delivery', () => {
    const { file, header } = answer(/deferred request/);
    expect(file).toBe('src/gateway/defer/delivery.ts');
    expect(header).toMatch(/retry/);
  });
});
