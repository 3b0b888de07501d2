/**
 * An Ollama Modelfile for a base model and a GGUF LoRA adapter (docs/design.md §GGUF adapters):
 *
 *   FROM <the base GGUF's path, or its Ollama name when the file is a blob of Ollama's store>
 *   ADAPTER <the adapter GGUF>
 *   TEMPLATE """…"""          the chat template, where it maps simply onto Ollama's Go template
 *   SYSTEM """…"""            the lessons when given (docs/design.md §Lessons), else the default
 *                            system prompt the Jinja template inserts, if any
 *   PARAMETER stop "<|im_end|>" …   the model's end-of-turn tokens
 *
 * The Jinja → Go mapping covers the two layouts whose turns are plain text around role names:
 * ChatML (`<|im_start|>role\n…<|im_end|>`: SmolLM2, Qwen2/2.5, Qwen3 without its thinking
 * switches) and Llama 3 (`<|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>`). Anything
 * else (tools, date preambles, thinking blocks, Llama 2's [INST]) is left to Ollama, which
 * detects a template from the GGUF's tokenizer.chat_template itself, and a note says so. A base
 * from Ollama's store keeps that model's own template.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface ModelfileInput {
  /** The base: a GGUF path or a model folder. */
  base: string;
  adapter: string;
  chatTemplate?: string;
  /** The text of the model's end-of-generation tokens. */
  stopTokens: string[];
  /** A system prompt (the lessons) for SYSTEM, replacing the template's default one. */
  system?: string;
}

export interface Modelfile {
  text: string;
  /** What FROM names: a path, or an Ollama model name. */
  from: string;
  fromOllama: boolean;
  /** Which template was written: 'chatml', 'llama3', or none (see notes). */
  template: 'chatml' | 'llama3' | null;
  notes: string[];
}

const CHATML = `{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ if and $last (ne .Role "assistant") }}<|im_start|>assistant
{{ end }}
{{- end }}`;

const LLAMA3 = `{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
<|start_header_id|>{{ .Role }}<|end_header_id|>

{{ .Content }}<|eot_id|>
{{- if and $last (ne .Role "assistant") }}<|start_header_id|>assistant<|end_header_id|>

{{ end }}
{{- end }}`;

/** Which simple layout a Jinja chat template is, and its default system prompt; null when none maps simply. */
export function mapChatTemplate(jinja: string): { kind: 'chatml' | 'llama3'; template: string; system?: string; end: string } | { kind: null; reason: string } {
  const complex: [RegExp, string][] = [[/\btools\b/, 'tool calls'], [/enable_thinking|<think>|reasoning_content/, 'thinking blocks'], [/strftime_now|date_string|Cutting Knowledge/, 'a date preamble']];
  const hit = complex.find(([re]) => re.test(jinja))?.[1];
  if (jinja.includes('<|im_start|>')) {
    if (hit) return { kind: null, reason: `its ChatML template also handles ${hit}, which has no simple Ollama form` };
    // the newline in the Jinja string literal is written `\n` in a tokenizer_config.json and as itself in some GGUFs
    const sys = /<\|im_start\|>system(?:\\n|\n)([^'"{}]*?)<\|im_end\|>/.exec(jinja);
    return { kind: 'chatml', template: CHATML, end: '<|im_end|>', ...(sys && sys[1] ? { system: unescape(sys[1]) } : {}) };
  }
  if (jinja.includes('<|start_header_id|>')) {
    if (hit) return { kind: null, reason: `its Llama 3 template also handles ${hit}, which has no simple Ollama form` };
    return { kind: 'llama3', template: LLAMA3, end: '<|eot_id|>' };
  }
  return { kind: null, reason: 'its chat template is neither ChatML nor Llama 3' };
}

function unescape(s: string): string {
  return s.replace(/\\n/g, '\n').replace(/\\'/g, "'");
}

/** `registry.ollama.ai/library/qwen3/0.6b` → `qwen3:0.6b`; other hosts keep their path. */
function ollamaName(manifestRel: string): string {
  const parts = manifestRel.split(path.sep);
  const tag = parts.pop()!;
  const name = parts[0] === 'registry.ollama.ai' && parts[1] === 'library' ? parts.slice(2).join('/') : parts[0] === 'registry.ollama.ai' ? parts.slice(1).join('/') : parts.join('/');
  return `${name}:${tag}`;
}

/** The Ollama model whose manifest names this blob as its model layer, when the file is in Ollama's store. */
export function ollamaModelForBlob(file: string): string | undefined {
  const m = /^sha256-([0-9a-f]{64})$/.exec(path.basename(file));
  if (!m || path.basename(path.dirname(file)) !== 'blobs') return undefined;
  const manifests = path.join(path.dirname(path.dirname(file)), 'manifests');
  const digest = `sha256:${m[1]}`;
  const walk = (dir: string, depth: number): string | undefined => {
    if (depth > 5 || !fs.existsSync(dir)) return undefined;
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        const found = walk(full, depth + 1);
        if (found) return found;
      } else {
        try {
          const j = JSON.parse(fs.readFileSync(full, 'utf8')) as { layers?: { mediaType?: string; digest?: string }[] };
          if (j.layers?.some((l) => l.digest === digest && l.mediaType === 'application/vnd.ollama.image.model')) return ollamaName(path.relative(manifests, full));
        } catch {
          // not a manifest
        }
      }
    }
    return undefined;
  };
  return walk(manifests, 0);
}

/**
 * A value in Ollama's Modelfile triple quotes, and whether the text had to change. Ollama's parser
 * (its parser/parser.go) has no escapes: a """ value runs to the first line break after which
 * what it has read ends in """ (spaces and tabs aside), and it keeps only printable characters,
 * line breaks and tabs. So a line of the text that ends in """ gets its last quote written as
 * ” (it would end the value there), a quote run inside a line stays as it is, and characters
 * Ollama would drop are dropped here (other spaces become a space), \r\n becoming \n. A text
 * ending in one or two quotes is fine: the parser strips exactly the last three.
 */
export function tripleQuoted(text: string): { value: string; changed: boolean } {
  const clean = text
    .replace(/\r\n?/g, '\n')
    .replace(/[^\S\n\t ]/gu, ' ')
    .replace(/[\p{Cc}\p{Cf}\p{Co}\p{Cs}\p{Cn}]/gu, (c) => (c === '\n' || c === '\t' ? c : ''))
    .split('\n')
    .map((line) => line.replace(/("{3,})([ \t]*)$/, (_, run: string, tail: string) => `${run.slice(0, -1)}”${tail}`))
    .join('\n');
  return { value: `"""${clean}"""`, changed: clean !== text };
}

const quote = (s: string): string => (/^[^\s"#]+$/.test(s) ? s : JSON.stringify(s));

export function buildModelfile(input: ModelfileInput): Modelfile {
  const notes: string[] = [];
  const ollama = ollamaModelForBlob(input.base);
  const from = ollama ?? path.resolve(input.base);
  const lines = ['# Written by hindsight export-model: the base model with the fine-tuned LoRA adapter.', `FROM ${quote(from)}`, `ADAPTER ${quote(path.resolve(input.adapter))}`];
  let template: Modelfile['template'] = null;
  const stops = new Set(input.stopTokens.filter((s) => s.length > 0));
  if (ollama) notes.push(`FROM names Ollama's ${ollama}: its own template and parameters apply`);
  else if (!input.chatTemplate) notes.push('the model has no chat template: TEMPLATE is left out (Ollama then sends the prompt as it is)');
  else {
    const mapped = mapChatTemplate(input.chatTemplate);
    if (mapped.kind === null) notes.push(`TEMPLATE is left out: ${mapped.reason}; Ollama picks a template from the GGUF's tokenizer.chat_template itself`);
    else {
      template = mapped.kind;
      lines.push(`TEMPLATE """${mapped.template}"""`);
      if (mapped.system && !input.system?.trim()) lines.push(`SYSTEM """${mapped.system}"""`);
      stops.add(mapped.end);
    }
  }
  const system = input.system?.trim();
  if (system) {
    const { value, changed } = tripleQuoted(system);
    lines.push(`SYSTEM ${value}`);
    notes.push(
      'SYSTEM holds the lessons: Ollama gives them to every chat that sends no system message of its own (one that does replaces them)' +
        (changed ? "; characters Ollama's Modelfile cannot hold were changed (a line ending in \"\"\" ends in ” instead, control characters dropped)" : ''),
    );
  }
  if (!ollama) for (const s of stops) lines.push(`PARAMETER stop ${JSON.stringify(s)}`);
  return { text: lines.join('\n') + '\n', from, fromOllama: Boolean(ollama), template, notes };
}
