/**
 * The shape of the code, checked: no import cycle in src/, imports point one way through the
 * layers (docs/architecture.md), files and functions stay a size a reader can hold, and the folders
 * are rooms a reader can find things in: none too crowded, no file beside a folder of its name, no
 * two files a reader takes for one, the service entered by one door, and test/ laid out as src/.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { LAYERS } from './support/layers.js';

const SRC = resolve(import.meta.dirname, '../src');
const TEST = import.meta.dirname;
const MAX_FILE_LINES = 500;
/** The engine's modules that may ask a Store: every decision goes through the limiter. */
const STORE_DOORS: ReadonlySet<string> = new Set(['limiter/store-layer']);
/** What a Store does; only the limiter asks it (every decision goes through the limiter). */
const STORE_METHODS: ReadonlySet<string> = new Set(['consume', 'peek', 'consumeAll', 'addToWindow', 'heartbeat', 'reset', 'resetPrefix', 'close', 'acquireSlot', 'releaseSlot']);
const MAX_FUNCTION_LINES = 60;
/** A function longer than MAX_FUNCTION_LINES must say why in a comment just above it, starting so. */
const LONG_REASON = /Long on purpose:/;


/** How many `.ts` files a folder of src/ may hold before it wants splitting by concern. */
const MAX_FOLDER_FILES = 20;
/** Folders of src/ (relative to it) that may hold more than MAX_FOLDER_FILES `.ts` files, and why. */
const CROWDED_FOLDERS: ReadonlyMap<string, string> = new Map<string, string>([]);
/** Names only one file in src/ may have, and why: a second one would be read as the first. */
const ONE_OF_A_KIND: ReadonlyMap<string, string> = new Map([
  ['limiter.ts', 'the engine is src/limiter/; a second limiter.ts reads as a second engine (rules/limiter.ts became rules/create-limiter.ts)'],
  ['errors.ts', 'the one table of typed errors'],
  ['decision.ts', 'the one Decision type'],
  ['policy.ts', 'the one Policy → CompiledPolicy'],
  ['clock.ts', 'the one shared process clock'],
]);
/** The folders (relative to src/) that reach the service, and its one door. */
const SERVICE_CLIENTS: readonly string[] = ['gateway/', 'cli/'];
const SERVICE_DOOR = 'service/index';
/** What may stand at the root of test/: the tests of the whole suite, not of one folder of src/. */
const SUITE_WIDE_TESTS: ReadonlySet<string> = new Set(['architecture.test.ts', 'package.test.ts', 'deploy.test.ts']);
/** Folders of test/ (at any depth) that hold what tests share or read, not the tests of one folder of src/. */
const TEST_ONLY_FOLDERS: ReadonlySet<string> = new Set(['support', 'vectors', 'docs', 'scale', 'fixtures']);
/** Folders of test/ (relative to it) with no folder of src/ of the same path, and why. */
const UNMIRRORED_TEST_FOLDERS: ReadonlyMap<string, string> = new Map([
  ['foundations', "the modules at src/'s root (units.ts, duration.ts, keys.ts...): their tests cannot stand at test/'s root"],
  ['model', 'the model-based suite: a reference model of every algorithm and random schedules over every mode, store and fault, checking each guarantee the docs state, across rooms (engine, stores, faults)'],
  ['limiter/fault', "src/limiter/'s breaker, failure modes and store guard under chaos: vitest.config.ts runs this folder after the rest, one file at a time"],
  ['security', 'regression tests of attacks (issue 27), each named after its attack and crossing rooms (service, engine, store) as the attack does'],
  ['store/memory', "the memory store is files of src/store/ (memory.ts, key-table.ts, recency.ts, state-spaces.ts, record-arena.ts); its tests are a folder, as the other stores'"],
]);

interface Folder {
  /** Absolute. */
  readonly path: string;
  /** The names of its files and of its folders. */
  readonly files: readonly string[];
  readonly folders: readonly string[];
}

/** `root` and every folder below it. */
function foldersOf(root: string): Folder[] {
  const entries = readdirSync(root, { withFileTypes: true });
  const folder = { path: root, files: entries.filter((entry) => entry.isFile()).map((entry) => entry.name), folders: entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name) };
  return [folder, ...folder.folders.flatMap((name) => foldersOf(join(root, name)))];
}

function sourceFiles(): string[] {
  return foldersOf(SRC).flatMap((folder) => folder.files.filter((name) => name.endsWith('.ts')).map((name) => join(folder.path, name)));
}

/** `a/b.ts` or `a/b.test.ts` beside `a/b/`, in `root` and below (named from the project's root): one thing in two places. */
function filesBesideTheirFolder(root: string): string[] {
  const named = (path: string): string => relative(resolve(SRC, '..'), path);
  return foldersOf(root).flatMap((folder) =>
    folder.files
      .map((name) => ({ name, stem: name.split('.')[0]! }))
      .filter(({ stem }) => stem !== '' && folder.folders.includes(stem))
      .map(({ name, stem }) => `${named(join(folder.path, name))} beside ${named(join(folder.path, stem))}/`),
  );
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

  it(`keeps each folder of src/ to ${MAX_FOLDER_FILES} .ts files, unless CROWDED_FOLDERS says why`, () => {
    const crowded = foldersOf(SRC)
      .map((folder) => ({ name: relative(SRC, folder.path) || '.', count: folder.files.filter((name) => name.endsWith('.ts')).length }))
      .filter(({ name, count }) => count > MAX_FOLDER_FILES && !CROWDED_FOLDERS.has(name))
      .map(({ name, count }) => `src/${name}/: ${count} .ts files`);
    expect(crowded, 'split the folder by concern into subfolders, or write why it stays whole in CROWDED_FOLDERS (test/architecture.test.ts)').toEqual([]);
  });

  it('has no file beside a folder of its name (x.ts beside x/), in src/ and test/', () => {
    const beside = [...filesBesideTheirFolder(SRC), ...filesBesideTheirFolder(TEST)];
    expect(beside, 'move the file into its folder (as its index.ts, or named for what it does), or rename one of the two').toEqual([]);
  });

  it('gives no two files of src/ a name of ONE_OF_A_KIND', () => {
    const twice = [...ONE_OF_A_KIND].flatMap(([name, why]) => {
      const named = files.filter((file) => basename(file) === name);
      return named.length > 1 ? [`${name}: ${named.map(moduleName).join(', ')} (${why})`] : [];
    });
    expect(twice, 'rename all but one, each for what it does (as rules/create-limiter.ts)').toEqual([]);
  });

  it(`lets ${SERVICE_CLIENTS.join(' and ')} reach the service only through src/${SERVICE_DOOR}.ts`, () => {
    const around: string[] = [];
    for (const [file, targets] of graph) {
      const from = moduleName(file);
      if (!SERVICE_CLIENTS.some((prefix) => from.startsWith(prefix))) continue;
      for (const to of targets.map(moduleName)) if (to.startsWith('service/') && to !== SERVICE_DOOR) around.push(`${from} imports ${to}`);
    }
    expect(around, `import it from src/${SERVICE_DOOR}.ts (add it to its re-exports if it is not there yet)`).toEqual([]);
  });

  it('lays test/ out as src/: suite-wide tests at its root, every other folder the path of a folder of src/', () => {
    const misplaced: string[] = [];
    const sourceFolders = new Set(foldersOf(SRC).map((folder) => relative(SRC, folder.path)));
    const [root, ...below] = foldersOf(TEST);
    for (const name of root!.files) if (!SUITE_WIDE_TESTS.has(name)) misplaced.push(`test/${name}: not a suite-wide test`);
    for (const folder of below) {
      const path = relative(TEST, folder.path);
      if (path.split(sep).some((part) => TEST_ONLY_FOLDERS.has(part)) || UNMIRRORED_TEST_FOLDERS.has(path)) continue;
      if (!sourceFolders.has(path)) misplaced.push(`test/${path}/: src/${path}/ is no folder`);
    }
    expect(misplaced, 'move the tests to the folder of test/ that has the path of the code they test in src/ (or write why not in UNMIRRORED_TEST_FOLDERS)').toEqual([]);
  });
});
