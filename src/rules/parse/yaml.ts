/**
 * The YAML layer of the rules loader: text in, YAML documents with positions out. It refuses
 * input that would cost memory or time out of proportion to its size (too large, nested too
 * deep, alias bombs) before building anything big, and collects problems as `RulesError`s at
 * the line:col of the node at fault.
 */
import { Composer, Lexer, LineCounter, Parser, isAlias, isMap, isScalar, isSeq, visit } from 'yaml';
import type { Alias, Document, Node } from 'yaml';
import { RulesError } from '../../errors.js';
import type { SourceLocation } from '../types.js';

/** The bounds every rules source is held to. A source past one is refused, never half-loaded. */
export const RULES_LIMITS = Object.freeze({
  /** Largest rules file (or `PUT /v1/rules` body), in bytes. */
  maxBytes: 1_048_576,
  /** Deepest YAML nesting (mappings and lists); 64 descriptor levels need about 130. */
  maxYamlDepth: 256,
  /** Deepest descriptor nesting (`descriptors` inside `descriptors`). */
  maxDescriptorDepth: 64,
  /** Most descriptors in one domain, nested ones included. */
  maxDescriptorsPerDomain: 100_000,
  /** Passed to the yaml library: how far aliases may multiply a document. */
  maxAliasCount: 10_000,
  /** Most YAML nodes read in one source once aliases are followed. */
  maxNodes: 2_000_000,
  /** Errors collected per source before giving up on it. */
  maxErrors: 100,
});

/** Thrown inside the loader to stop reading a source after a limit error; never escapes it. */
export class StopReading extends Error {}

/**
 * The problems found in one source, each placed at a line:col. Also counts the YAML nodes read,
 * so aliases cannot multiply the work without bound.
 */
export class Problems {
  readonly errors: RulesError[] = [];
  private nodesRead = 0;
  /** Messages already recorded: a mistake inside an anchor is reported once, not at every alias. */
  private readonly seen = new Set<string>();

  constructor(
    readonly source: string,
    private readonly lineCounter: LineCounter,
  ) {
    lineCounter.addNewLine(0);
  }

  /** Where `offset` (0-based, in the source text) is, as 1-based line and column. */
  locate(offset: number): SourceLocation {
    const { line, col } = this.lineCounter.linePos(offset);
    return Object.freeze({ file: this.source, line, column: col });
  }

  /** Records a problem at `offset`; stops reading the source once too many are collected. */
  add(offset: number, path: string, problem: string): void {
    const { line, column } = this.locate(offset);
    const place = `${line}:${column}: ${problem}`;
    if (this.seen.has(place)) return;
    this.seen.add(place);
    this.errors.push(new RulesError(this.source, line, column, path, problem));
    if (this.errors.length >= RULES_LIMITS.maxErrors) throw new StopReading();
  }

  /** Records a problem that makes the rest of the source pointless to read, and stops. */
  fatal(offset: number, path: string, problem: string): never {
    const { line, column } = this.locate(offset);
    this.errors.push(new RulesError(this.source, line, column, path, problem));
    throw new StopReading();
  }

  /** Counts `count` more nodes read at `offset`; stops when aliases have multiplied the work too far. */
  countNodes(count: number, offset: number, path: string): void {
    this.nodesRead += count;
    if (this.nodesRead > RULES_LIMITS.maxNodes) {
      this.fatal(offset, path, `the rules expand (through aliases) to more than ${RULES_LIMITS.maxNodes} YAML nodes; write them out with fewer aliases`);
    }
  }
}

/** The message for a source over {@link RULES_LIMITS.maxBytes}. */
export function sizeProblem(bytes: number): string {
  return `${bytes} bytes is over the limit of ${RULES_LIMITS.maxBytes} bytes (1 MiB) for one rules source; split the domains across several files`;
}

/** Start offset of a node (0 when it has no position, e.g. an empty value). */
export function offsetOf(node: Node | null | undefined): number {
  return node?.range?.[0] ?? 0;
}

/** One parsed document with what readers need to follow its aliases. */
export interface YamlDocument {
  readonly document: Document.Parsed;
  /** Every alias in the document and the node its anchor names (undefined: no such anchor before it). */
  readonly aliasTargets: ReadonlyMap<Alias, Node | undefined>;
}

/**
 * Parses `text` into YAML documents. Syntax errors, depth and alias limits are recorded in
 * `problems`; documents with such errors are left out, so readers only see sound YAML.
 */
export function parseYamlDocuments(text: string, problems: Problems, lineCounter: LineCounter): YamlDocument[] {
  const composer = new Composer({ version: '1.1', prettyErrors: false, uniqueKeys: true });
  const documents = [...composer.compose(depthBoundedTokens(text, problems, lineCounter))];
  const sound: YamlDocument[] = [];
  for (const document of documents) {
    if (document.errors.length > 0) {
      for (const error of document.errors) problems.add(error.pos[0], '', syntaxProblem(error.code, error.message, text, error.pos));
      continue;
    }
    if (!withinAliasLimit(document, problems)) continue;
    sound.push({ document, aliasTargets: collectAliasTargets(document) });
  }
  return sound;
}

/** Feeds the parser one lexeme at a time so nesting is refused as soon as it gets too deep. */
function* depthBoundedTokens(text: string, problems: Problems, lineCounter: LineCounter) {
  const parser = new Parser(lineCounter.addNewLine);
  for (const lexeme of new Lexer().lex(text)) {
    yield* parser.next(lexeme);
    if (parser.stack.length > RULES_LIMITS.maxYamlDepth) {
      problems.fatal(parser.offset, '', `YAML nested deeper than ${RULES_LIMITS.maxYamlDepth} levels; flatten the rules`);
    }
  }
  yield* parser.end();
}

const SYNTAX_HINTS: Readonly<Record<string, string>> = {
  DUPLICATE_KEY: 'appears twice in the same mapping; keep one',
  TAB_AS_INDENT: 'tabs are not allowed as indentation in YAML; indent with spaces',
};

function syntaxProblem(code: string, message: string, text: string, pos: [number, number]): string {
  if (code === 'DUPLICATE_KEY') return `YAML error: key ${JSON.stringify(keyAt(text, pos[0]))} ${SYNTAX_HINTS[code]}`;
  if (code in SYNTAX_HINTS) return `YAML error: ${SYNTAX_HINTS[code]}`;
  return `YAML error: ${message.charAt(0).toLowerCase()}${message.slice(1)}`;
}

/** The key written at `offset` (up to its colon), for duplicate-key messages. */
function keyAt(text: string, offset: number): string {
  const line = text.slice(offset, text.indexOf('\n', offset) === -1 ? undefined : text.indexOf('\n', offset));
  const key = line.split(/:(\s|$)/)[0]!.trim();
  return key.length > 40 ? `${key.slice(0, 40)}…` : key;
}

/** Uses the yaml library's own alias bomb guard: converting to JS fails fast past `maxAliasCount`. */
function withinAliasLimit(document: Document.Parsed, problems: Problems): boolean {
  try {
    document.toJS({ maxAliasCount: RULES_LIMITS.maxAliasCount });
    return true;
  } catch (error) {
    if (!(error instanceof ReferenceError) || !/alias count/i.test(error.message)) return true; // the readers report it, with a position
    problems.add(offsetOf(firstAlias(document)), '', `aliases expand this document more than ${RULES_LIMITS.maxAliasCount} times over (an alias bomb?); write the rules out or use fewer aliases`);
    return false;
  }
}

function firstAlias(document: Document.Parsed): Alias | undefined {
  let found: Alias | undefined;
  visit(document, {
    Alias(_key, node) {
      found = node;
      return visit.BREAK;
    },
  });
  return found;
}

/** One pass in document order: an alias names the last anchor of that name before it. */
function collectAliasTargets(document: Document.Parsed): Map<Alias, Node | undefined> {
  const anchors = new Map<string, Node>();
  const targets = new Map<Alias, Node | undefined>();
  visit(document, {
    Node(_key, node) {
      if (isAlias(node)) targets.set(node, anchors.get(node.source));
      else if (node.anchor !== undefined) anchors.set(node.anchor, node);
    },
  });
  return targets;
}

/** Describes a YAML node's kind for error messages: "a mapping", "a list", or the scalar's value. */
export function describeNode(node: Node | null | undefined): string {
  if (node === null || node === undefined) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    const { value } = node;
    if (value === null) return 'nothing';
    if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
    if (value instanceof Date) return JSON.stringify(String(node.source));
    return String(node.source ?? value);
  }
  return 'an alias';
}
