/**
 * The built-in tools (docs/design.md §Rollouts), safe by construction: no shell, no network,
 * no file access, nothing a model's text can turn into code.
 *
 * - `calculator` {expression}: arithmetic through ./calculator.ts's parser.
 * - `current_time` {timezone?}: the time now as ISO 8601 with its UTC offset, in an IANA zone
 *   (default UTC).
 * - `search_history` {query, limit?}: full-text search over the user's own imported sessions
 *   (../store/history-search.ts), each hit with its session title and a snippet. Offered only
 *   when a database is open.
 */
import type { Store } from '../store/database.js';
import { searchHistory } from '../store/history-search.js';
import { evaluateExpression, formatNumber } from './calculator.js';
import { stringArgument, type Tool } from './tools.js';

export const BUILTIN_TOOL_NAMES = ['calculator', 'current_time', 'search_history'] as const;

export const calculatorTool: Tool = {
  schema: {
    type: 'function',
    function: {
      name: 'calculator',
      description: 'Evaluates an arithmetic expression: numbers, + - * / ^ % (modulo), parentheses, pi, e, and sqrt, abs, round(x[, digits]), floor, ceil, min, max, ln, log10, exp.',
      parameters: { type: 'object', properties: { expression: { type: 'string', description: 'for example (2 + 3) * 4 ^ 2' } }, required: ['expression'] },
    },
  },
  run: (args) => formatNumber(evaluateExpression(stringArgument(args, 'expression', true))),
};

/** `current_time` reading `clock` (a test passes a fixed one). */
export function currentTimeTool(clock: () => Date = () => new Date()): Tool {
  return {
    schema: {
      type: 'function',
      function: {
        name: 'current_time',
        description: 'The current date and time in ISO 8601 with the UTC offset, in the given IANA time zone (default UTC).',
        parameters: { type: 'object', properties: { timezone: { type: 'string', description: 'an IANA time zone such as Europe/Paris' } } },
      },
    },
    run: (args) => isoInZone(clock(), stringArgument(args, 'timezone', false) ?? 'UTC'),
  };
}

/** `2024-05-01T14:03:09+02:00` for `date` seen in `timeZone`; throws on an unknown zone. */
export function isoInZone(date: Date, timeZone: string): string {
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
  } catch {
    throw new Error(`unknown time zone '${timeZone}' (use an IANA name such as Europe/Paris or UTC)`);
  }
  const part = Object.fromEntries(format.formatToParts(date).map((p) => [p.type, p.value]));
  const local = Date.UTC(+part.year!, +part.month! - 1, +part.day!, +part.hour!, +part.minute!, +part.second!);
  const offsetMinutes = Math.round((local - Math.floor(date.getTime() / 1000) * 1000) / 60_000);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  const offset = offsetMinutes === 0 ? 'Z' : `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return `${part.year}-${part.month}-${part.day}T${part.hour}:${part.minute}:${part.second}${offset}`;
}

const MAX_HITS = 10;

/** `search_history` over `store`'s sessions, less those in `hidden`. */
export function searchHistoryTool(store: Store, hidden: readonly string[] = []): Tool {
  return {
    schema: {
      type: 'function',
      function: {
        name: 'search_history',
        description: "Searches the user's past conversations for turns containing all the given words; returns each match with its conversation's title.",
        parameters: {
          type: 'object',
          properties: { query: { type: 'string', description: 'the words to look for' }, limit: { type: 'integer', description: `how many matches, 1 to ${MAX_HITS} (default 5)` } },
          required: ['query'],
        },
      },
    },
    run: (args) => {
      const query = stringArgument(args, 'query', true);
      const limit = args.limit === undefined ? 5 : args.limit;
      if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > MAX_HITS) throw new Error(`argument "limit" must be a whole number from 1 to ${MAX_HITS}`);
      if (!/[\p{L}\p{N}]/u.test(query)) throw new Error('the query has no words to search for');
      const hits = searchHistory(store, query, limit as number, hidden);
      if (!hits.length) return `no conversation mentions ${JSON.stringify(query)}`;
      return hits.map((h, i) => `${i + 1}. "${h.title}" (${h.role}, turn ${h.turn}): ${h.snippet.replace(/\s+/g, ' ')}`).join('\n');
    },
  };
}

export interface BuiltinOptions {
  /** The database `search_history` searches; without it that tool is left out. */
  store?: Store;
  /** Sessions `search_history` never shows: a training run's held-out split. */
  hiddenSessions?: readonly string[];
  clock?: () => Date;
}

/** The built-in tools available with these options. */
export function builtinTools(options: BuiltinOptions = {}): Tool[] {
  const tools = [calculatorTool, currentTimeTool(options.clock)];
  if (options.store) tools.push(searchHistoryTool(options.store, options.hiddenSessions));
  return tools;
}
