/**
 * The tools a rollout may call (docs/design.md §Rollouts): a registry of named tools, each an
 * OpenAI-style schema the chat template shows the model and a function that runs a call.
 * Every way a call can go wrong (arguments that are not a JSON object, an unknown tool, a
 * timeout, a thrown error) comes back as a failed {@link ToolCallRecord} whose result says so
 * in one line: the episode puts it in a tool turn and goes on. Nothing here throws for a
 * model's bad call.
 */
import type { ToolCallRecord } from '../../src-shared/rollout.js';
import { ON_POLICY_DEFAULTS } from '../../src-shared/rollout.js';

/** An OpenAI-style tool definition, as chat templates take them. */
export interface ToolSchema {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface ToolContext {
  /** Aborted when the call has run out of time; a tool that waits on I/O should stop then. */
  signal: AbortSignal;
}

export interface Tool {
  schema: ToolSchema;
  /** The result text; throw (an Error with a one-line message) to report a failure. */
  run(args: Record<string, unknown>, context: ToolContext): Promise<string> | string;
}

/** A tool's name: what OpenAI accepts, and safe to print. */
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A result longer than this is cut (with a note): a tool turn must leave room for the reply. */
export const MAX_RESULT_CHARS = 4000;

export interface RegistryOptions {
  /** A call is abandoned after this long (ms). */
  timeoutMs?: number;
}

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  readonly timeoutMs: number;

  constructor(tools: readonly Tool[] = [], options: RegistryOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? ON_POLICY_DEFAULTS.toolTimeoutMs;
    for (const t of tools) this.add(t);
  }

  add(tool: Tool): void {
    const name = tool.schema.function.name;
    if (!TOOL_NAME.test(name)) throw new Error(`tool name ${JSON.stringify(name)} is not 1–64 letters, digits, _ or -`);
    if (this.tools.has(name)) throw new Error(`two tools are named '${name}'`);
    this.tools.set(name, tool);
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  get names(): string[] {
    return [...this.tools.keys()];
  }

  /** The schemas to show the model: all tools, or the named ones in that order. */
  schemas(names?: readonly string[]): ToolSchema[] {
    return (names ?? this.names).map((n) => {
      const tool = this.tools.get(n);
      if (!tool) throw new Error(`no tool named '${n}'`);
      return tool.schema;
    });
  }

  /**
   * Runs one call. `args` is what the model wrote: a JSON object, or the text of one. The
   * record's `ok` says whether the tool answered; its `result` is the answer or the error.
   */
  async execute(name: string, args: unknown): Promise<ToolCallRecord> {
    const started = performance.now();
    const done = (ok: boolean, result: string, parsed: unknown = args): ToolCallRecord => ({
      name, arguments: parsed, ok, result: ok ? capResult(result) : oneLine(result), ms: Math.round(performance.now() - started),
    });
    const tool = this.tools.get(name);
    if (!tool) return done(false, `error: unknown tool '${name}' (available: ${this.names.join(', ') || 'none'})`);
    const parsed = argumentObject(args);
    if ('error' in parsed) return done(false, `error: ${parsed.error}`);
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new ToolTimeout(`error: ${name} did not answer within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
    });
    try {
      const result = await Promise.race([Promise.resolve().then(() => tool.run(parsed.value, { signal: controller.signal })), timeout]);
      if (typeof result !== 'string') return done(false, `error: ${name} returned ${typeof result}, not text`, parsed.value);
      return done(true, result, parsed.value);
    } catch (err) {
      const message = err instanceof ToolTimeout ? err.message : `error: ${name} failed: ${(err as Error)?.message ?? String(err)}`;
      return done(false, message, parsed.value);
    } finally {
      clearTimeout(timer);
    }
  }
}

class ToolTimeout extends Error {}

/** The arguments as an object: models write them as an object or as a string of JSON. */
function argumentObject(args: unknown): { value: Record<string, unknown> } | { error: string } {
  let value = args;
  if (typeof args === 'string') {
    if (!args.trim()) return { value: {} };
    try {
      value = JSON.parse(args);
    } catch (err) {
      return { error: `the arguments are not valid JSON (${(err as Error).message})` };
    }
  }
  if (value === undefined || value === null) return { value: {} };
  if (typeof value !== 'object' || Array.isArray(value)) return { error: `the arguments must be a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value}` };
  return { value: value as Record<string, unknown> };
}

function oneLine(text: string): string {
  const line = text.replace(/\s*\n\s*/g, ' ').trim();
  return line.length > 500 ? `${line.slice(0, 500)}…` : line;
}

function capResult(text: string): string {
  return text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}\n[result cut at ${MAX_RESULT_CHARS} characters]` : text;
}

/** A string argument, or an Error naming it (for tools' own checks). */
export function stringArgument(args: Record<string, unknown>, key: string, required: true): string;
export function stringArgument(args: Record<string, unknown>, key: string, required: false): string | undefined;
export function stringArgument(args: Record<string, unknown>, key: string, required: boolean): string | undefined {
  const v = args[key];
  if (v === undefined || v === null) {
    if (required) throw new Error(`missing argument "${key}"`);
    return undefined;
  }
  if (typeof v !== 'string') throw new Error(`argument "${key}" must be a string, got ${JSON.stringify(v)}`);
  return v;
}
