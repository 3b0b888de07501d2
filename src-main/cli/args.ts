// Shared argument parsing and help for the CLI commands, on node:util's parseArgs.
//
// Each command declares its options once, in a CommandSpec: the parser reads the types and
// defaults from it, and `--help` is rendered from the same declaration (name, value,
// description, default), so the help cannot drift from what the parser accepts
// (docs/design.md §Command line).
import { parseArgs } from 'node:util';
import { defaultDbPath } from '../store/db-location.js';
import { boundText, checkBound, TRAIN_BOUNDS, type BoundedOption } from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';

/** Every command's `--db` defaults to the app's own database. */
export { defaultDbPath };

/** A command takes its argv (after the command name) and returns its exit status. */
export type Command = (argv: string[]) => Promise<number | void>;

/** Bad usage: an unknown flag, a missing argument, a value out of range. Exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** One flag: what parseArgs needs, plus what its help line says. */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
  /** The parser's default: the value the command sees when the flag is absent. */
  readonly default?: string | boolean;
  /** The value's placeholder in the help: DIR, N, cpu|cuda. */
  readonly value?: string;
  /** What the flag does, one short line. */
  readonly help: string;
  /** What happens without the flag, where the parser has no default ("one epoch"). */
  readonly otherwise?: string | (() => string);
  /** The command refuses to run without it; a string says when ("with --backend local"). */
  readonly required?: boolean | string;
  /** A heading the flag is listed under, for flags that apply to one mode only. */
  readonly group?: string;
}

export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

export interface CommandSpec<O extends OptionSpecs = OptionSpecs> {
  readonly name: string;
  /** What follows `hindsight <name>` in the usage line: positionals and required flags. */
  readonly synopsis: string;
  /** What the command does, a few lines. */
  readonly about: string;
  readonly options: O;
  readonly positionals?: boolean;
}

/** `--help`, accepted by every command; the CLI entry answers it before the command runs. */
export const HELP_OPTION = { help: { type: 'boolean', short: 'h', default: false, help: 'print this help and exit' } } as const;

/** `--db PATH`, for the commands that open a database. */
export const DB_OPTION = {
  db: { type: 'string', value: 'PATH', help: 'the database file', otherwise: () => `the app's own database, ${defaultDbPath()}` },
} as const;

/** `--json`, with what it prints for this command. */
export function jsonOption<H extends string>(help: H) {
  return { json: { type: 'boolean', default: false, help } } as const;
}

/** Every flag a command's parser accepts: its own, then --help. */
export function allOptions<O extends OptionSpecs>(spec: CommandSpec<O>): O & typeof HELP_OPTION {
  return { ...spec.options, ...HELP_OPTION };
}

export function parseCommandArgs<O extends OptionSpecs>(argv: string[], spec: CommandSpec<O>) {
  try {
    return parseArgs({ args: argv, options: allOptions(spec), allowPositionals: spec.positionals ?? false, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** True when `--help` or `-h` comes before any `--` (after which arguments are positionals). */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export function usageLine(spec: CommandSpec): string {
  return `usage: hindsight ${spec.name} ${spec.synopsis}`.trimEnd();
}

/** The default part of a help line: "(required)", "(default: X)", or nothing for a switch. */
export function defaultNote(option: OptionSpec): string {
  if (option.required) return typeof option.required === 'string' ? `(required ${option.required})` : '(required)';
  if (option.type === 'string' && option.default !== undefined) return `(default: ${option.default})`;
  if (option.type === 'boolean' && option.default === true) return '(default: on)';
  const otherwise = typeof option.otherwise === 'function' ? option.otherwise() : option.otherwise;
  return otherwise === undefined ? '' : `(default: ${otherwise})`;
}

function flagColumn(name: string, option: OptionSpec): string {
  const short = option.short ? `-${option.short}, ` : '';
  const value = option.type === 'string' ? ` ${option.value ?? 'VALUE'}` : '';
  return `${short}--${name}${value}${option.multiple ? ' …' : ''}`;
}

const FLAG_WIDTH = 22;
const LINE_WIDTH = 100;

/** Splits text into lines of at most `width` characters, at spaces (a longer word stays whole). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line];
}

function optionLine(name: string, option: OptionSpec): string {
  const flag = flagColumn(name, option);
  const text = [option.help, defaultNote(option), option.multiple ? '(repeatable)' : ''].filter(Boolean).join(' ');
  const indent = ' '.repeat(2 + FLAG_WIDTH);
  const body = wrap(text, LINE_WIDTH - indent.length).map((l) => indent + l);
  // A flag wider than its column puts its description on the next line.
  if (flag.length < FLAG_WIDTH) body[0] = `  ${flag.padEnd(FLAG_WIDTH)}${body[0]!.trimStart()}`;
  else body.unshift(`  ${flag}`);
  return body.join('\n');
}

/** The whole `--help` text of a command: usage, what it does, and every flag it accepts. */
export function formatHelp(spec: CommandSpec): string {
  const groups = new Map<string, string[]>();
  for (const [name, option] of Object.entries<OptionSpec>(allOptions(spec))) {
    const heading = option.group ?? '';
    groups.set(heading, [...(groups.get(heading) ?? []), optionLine(name, option)]);
  }
  const sections = [...groups].map(([heading, lines]) => (heading ? `${heading}:\n` : 'options:\n') + lines.join('\n'));
  return [usageLine(spec), '', spec.about.trim(), '', sections.join('\n\n'), ''].join('\n');
}

/** Parses a number flag, or throws a UsageError naming the flag. */
export function numberFlag(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a finite number, got '${value}'`);
  return n;
}

export function intFlag(name: string, value: string | undefined, fallback: number, min = 0): number {
  const n = numberFlag(name, value, fallback);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name} must be an integer ≥ ${min}, got '${value}'`);
  return n;
}

/**
 * A training option's flag (src-shared/training.ts TRAIN_BOUNDS), or undefined when not given.
 * Text that is no number is bad usage (exit 2); a number outside the option's bounds is refused
 * in one line naming the flag and its bounds (a UserError, exit 1).
 */
export function boundFlag(option: BoundedOption, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = value.trim() === '' ? NaN : Number(value);
  if (Number.isNaN(n)) throw new UsageError(`--${TRAIN_BOUNDS[option].flag} must be ${boundText(option)}, got '${value}'`);
  const problem = checkBound(option, n);
  if (problem) throw new UserError(problem);
  return n;
}

/** A training option's help line with its bounds: "learning rate, constant; > 0 and ≤ 1". */
export function ranged(option: BoundedOption, help: string): string {
  return `${help}; ${boundText(option)}`;
}

/** Writes the one machine-readable JSON object of `--json` mode. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

/** Rows of cells as a plain text table: each column but the last padded to its widest cell, two spaces between. */
export function tableLines(cells: string[][]): string[] {
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd());
}
