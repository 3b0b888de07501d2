/**
 * Where a checkpoint keeps its chat templates: tokenizer_config.json's `chat_template` (a string,
 * or a list of named templates), chat_template.jinja, chat_template.json, and a named one beside
 * the default in additional_chat_templates/<name>.jinja (as transformers saves them); a GGUF file
 * in `tokenizer.chat_template` and `tokenizer.chat_template.<name>` (./gguf/tokenizer-json.ts).
 *
 * Two are used (ChatTokenizer): the default, and `tool_use`, which transformers'
 * apply_chat_template takes instead whenever tools are given. Hermes 2 Pro's and Hermes 3's
 * default is plain ChatML that never shows the model its tools; their `tool_use` lists them and
 * writes the calls.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';

export interface ChatTemplates {
  /** The default: every render without tools, and with them where there is no `toolUse`. */
  main?: string;
  /** The template named `tool_use`: renders with tools offered. */
  toolUse?: string;
}

export function findChatTemplates(dir: string, config: Record<string, unknown>): ChatTemplates {
  const t = config.chat_template;
  const extra = path.join(dir, 'additional_chat_templates', 'tool_use.jinja');
  const toolUseFile = fs.statSync(extra, { throwIfNoEntry: false })?.isFile() ? fs.readFileSync(extra, 'utf8') : undefined;
  if (typeof t === 'string') return { main: t, ...(toolUseFile !== undefined ? { toolUse: toolUseFile } : {}) };
  if (Array.isArray(t)) {
    // Entries that are not {name, template: string} are not templates (and not taken).
    const named = (t as unknown[]).filter((x): x is { name?: unknown; template: string } => !!x && typeof x === 'object' && typeof (x as { template?: unknown }).template === 'string');
    const toolUse = named.find((x) => x.name === 'tool_use')?.template ?? toolUseFile;
    return { main: (named.find((x) => x.name === 'default') ?? named[0])?.template, ...(toolUse !== undefined ? { toolUse } : {}) };
  }
  const jinja = path.join(dir, 'chat_template.jinja');
  const json = fs.existsSync(jinja) ? undefined : readJsonIfExists(path.join(dir, 'chat_template.json'));
  const main = fs.existsSync(jinja) ? fs.readFileSync(jinja, 'utf8') : typeof json?.chat_template === 'string' ? json.chat_template : undefined;
  return { ...(main !== undefined ? { main } : {}), ...(toolUseFile !== undefined ? { toolUse: toolUseFile } : {}) };
}

/** The default chat template alone (an Ollama Modelfile's TEMPLATE). */
export function findChatTemplate(dir: string, config: Record<string, unknown>): string | undefined {
  return findChatTemplates(dir, config).main;
}

/** A JSON file's object, or undefined where there is no file; a file that does not parse is a UserError naming it. */
export function readJsonIfExists(file: string): Record<string, unknown> | undefined {
  if (!fs.existsSync(file)) return undefined;
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UserError(`${file}: invalid JSON (${(err as Error).message})`);
  }
}
