/**
 * A command's `--help`, generated from the flag table its parser reads, so every flag it takes is
 * listed, with its environment variable and default (a flag it does not take: admin/output.ts's
 * flagErrorText).
 */
import type { FlagText } from './flag-help.js';

/** What a command's help is made of. */
export interface CommandHelp {
  /** `serve`, `gateway`, ...: the word after `tollgate`. */
  readonly command: string;
  /** What follows `tollgate COMMAND` in the usage line, e.g. `[flags]` or `PATH [flags]`. */
  readonly synopsis: string;
  /** What the command does, a few lines. */
  readonly summary: string;
  /** The flags the parser takes (its table's names, in its order). */
  readonly flags: readonly string[];
  /** Each flag's environment variable, when the command reads one. */
  readonly env?: Readonly<Record<string, string>>;
  readonly text: Readonly<Record<string, FlagText>>;
  /** Lines after the flags: exit codes, where the docs are. */
  readonly footer?: string;
}

/** The flag column's width; a longer flag pushes its text to the next line. */
const FLAG_COLUMN = 34;

/** The help text: usage line, summary, one line per flag (`[default; VARIABLE]` at its end). */
export function renderCommandHelp(help: CommandHelp): string {
  const lines = [`Usage: tollgate ${help.command} ${help.synopsis}`, '', help.summary.trimEnd(), '', 'Flags:'];
  for (const flag of help.flags) {
    const text = help.text[flag];
    const name = `  --${flag}${text?.value === undefined ? '' : ` ${text.value}`}`;
    const notes = [text?.fallback === undefined ? undefined : `default ${text.fallback}`, help.env?.[flag]].filter((note) => note !== undefined);
    const described = `${text?.text ?? ''}${notes.length > 0 ? ` [${notes.join('; ')}]` : ''}`;
    lines.push(name.length < FLAG_COLUMN ? `${name.padEnd(FLAG_COLUMN)}${described}` : `${name}\n${' '.repeat(FLAG_COLUMN)}${described}`);
  }
  lines.push(`  -h, --help${' '.repeat(FLAG_COLUMN - 12)}this help`);
  if (help.env !== undefined) lines.push('', 'A flag wins over its environment variable.');
  if (help.footer !== undefined) lines.push('', help.footer.trimEnd());
  return `${lines.join('\n')}\n`;
}
