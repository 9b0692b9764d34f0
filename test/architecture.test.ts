/**
 * The shape of the code, checked: no import cycle in src/, imports point one way through the
 * layers (docs/architecture.md), and files and functions stay a size a reader can hold.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../src');
const MAX_FILE_LINES = 500;
/** The engine's modules that may ask a Store: every decision goes through the limiter. */
const STORE_DOORS: ReadonlySet<string> = new Set(['limiter/store-layer']);
/** What a Store does; only the limiter asks it (every decision goes through the limiter). */
const STORE_METHODS: ReadonlySet<string> = new Set(['consume', 'peek', 'consumeAll', 'addToWindow', 'reset', 'resetPrefix', 'close']);
const MAX_FUNCTION_LINES = 60;
/** A function longer than MAX_FUNCTION_LINES must say why in a comment just above it, starting so. */
const LONG_REASON = /Long on purpose:/;

/**
 * The layers, lowest first. A module may import its own layer and the ones below, never above.
 * Matched by path prefix (relative to src/, without extension); the first match wins.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['errors', 'options', 'duration', 'units', 'keys', 'clock', 'decision', 'tracing', 'algorithms/catalog'],
  // The SDK for callers: foundations only, never the engine (its users have no limiter).
  ['client/'],
  ['policy'],
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

function sourceFiles(dir: string = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function moduleName(file: string): string {
  return relative(SRC, file).replace(/\.ts$/, '');
}

function layerOf(name: string): number {
  const index = LAYERS.findIndex((prefixes) => prefixes.some((prefix) => (prefix.endsWith('/') ? name.startsWith(prefix) : name === prefix)));
  if (index === -1) throw new Error(`src/${name}.ts belongs to no layer: add it to LAYERS in test/architecture.test.ts`);
  return index;
}

const files = sourceFiles();
const parsed = new Map(files.map((file) => [file, ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)]));

/** Every relative import and re-export of a file (type-only ones included: they shape the design too). */
function importsOf(file: string): string[] {
  const targets: string[] = [];
  for (const statement of parsed.get(file)!.statements) {
    const specifier = (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) ? statement.moduleSpecifier : undefined;
    if (specifier === undefined || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.')) continue;
    targets.push(resolve(dirname(file), specifier.text.replace(/\.js$/, '.ts')));
  }
  return targets;
}

const graph = new Map(files.map((file) => [file, importsOf(file)]));

describe('architecture', () => {
  it('has no import cycle in src/', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'visiting' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'visiting');
      stack.push(file);
      for (const target of graph.get(file) ?? []) {
        if (state.get(target) === 'visiting') cycles.push([...stack.slice(stack.indexOf(target)), target].map(moduleName).join(' → '));
        else if (!state.has(target)) visit(target);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });

  it('imports point one way through the layers', () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      const from = moduleName(file);
      for (const target of targets) {
        const to = moduleName(target);
        if (layerOf(to) > layerOf(from)) upward.push(`${from} imports ${to}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('lets only the limiter (and the stores themselves) call a Store', () => {
    const callers: string[] = [];
    for (const [file, source] of parsed) {
      const name = moduleName(file);
      if (STORE_DOORS.has(name) || name.startsWith('store/')) continue;
      const visit = (node: ts.Node): void => {
        if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
          const method = node.expression.name.text;
          const receiver = node.expression.expression.getText(source);
          if (STORE_METHODS.has(method) && /store$/i.test(receiver)) {
            callers.push(`${name}.ts:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: ${receiver}.${method}()`);
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(callers).toEqual([]);
  });

  it(`keeps files under ${MAX_FILE_LINES} lines and functions under ${MAX_FUNCTION_LINES}, unless a comment says why`, () => {
    const tooLong: string[] = [];
    for (const [file, source] of parsed) {
      const lines = source.getLineAndCharacterOfPosition(source.end).line + 1;
      if (lines > MAX_FILE_LINES && !LONG_REASON.test(source.text.slice(0, 2000))) tooLong.push(`${moduleName(file)}.ts: ${lines} lines`);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
          const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
          const end = source.getLineAndCharacterOfPosition(node.end).line;
          const comments = ts.getLeadingCommentRanges(source.text, node.getFullStart()) ?? [];
          const explained = comments.some((range) => LONG_REASON.test(source.text.slice(range.pos, range.end)));
          if (end - start + 1 > MAX_FUNCTION_LINES && !explained) {
            tooLong.push(`${moduleName(file)}.ts:${start + 1}: a function of ${end - start + 1} lines`);
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(tooLong).toEqual([]);
  });
});
