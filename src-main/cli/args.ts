// Shared argument parsing for the CLI commands, on node:util's parseArgs.
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** Every command's `--db` defaults to the app's own database. */
export { defaultDbPath } from '../store/db-location.js';

/** A command takes its argv (after the command name) and returns its exit status. */
export type Command = (argv: string[]) => Promise<number | void>;

/** Bad usage: an unknown flag, a missing argument, a value out of range. Exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export const COMMON_OPTIONS = {
  db: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

type Options = NonNullable<ParseArgsConfig['options']>;

export function parseCommandArgs<O extends Options>(argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...options }, allowPositionals, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
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

/** Writes the one machine-readable JSON object of `--json` mode. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}
