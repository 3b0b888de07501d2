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
  // Entries that are not {name, template: string} are not templates (and not taken).
  const named = Array.isArray(t)
    ? (t as unknown[]).filter((x): x is { name?: unknown; template: string } => !!x && typeof x === 'object' && typeof (x as { template?: unknown }).template === 'string')
    : [];
  const main = typeof t === 'string' ? t : Array.isArray(t) ? (named.find((x) => x.name === 'default') ?? named[0])?.template : templateFile(dir);
  const toolUse = named.find((x) => x.name === 'tool_use')?.template ?? fileText(path.join(dir, 'additional_chat_templates', 'tool_use.jinja'));
  return { ...(main !== undefined ? { main } : {}), ...(toolUse !== undefined ? { toolUse } : {}) };
}

/** The template a folder keeps in a file of its own: chat_template.jinja, else chat_template.json's. */
function templateFile(dir: string): string | undefined {
  const jinja = fileText(path.join(dir, 'chat_template.jinja'));
  if (jinja !== undefined) return jinja;
  const json = readJsonIfExists(path.join(dir, 'chat_template.json'));
  return typeof json?.chat_template === 'string' ? json.chat_template : undefined;
}

/** A file's text, or undefined where there is no such file. */
function fileText(file: string): string | undefined {
  return fs.statSync(file, { throwIfNoEntry: false })?.isFile() ? fs.readFileSync(file, 'utf8') : undefined;
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
