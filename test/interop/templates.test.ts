/**
 * Chat templates and tokens against transformers itself (docs/design.md §Interoperability):
 * on the very tokenizer files test/model/real-templates.test.ts uses (./py/chat_templates.py
 * loads each folder with `AutoTokenizer.from_pretrained`), every conversation below renders
 * to the same text and the same token ids through Hindsight (ChatTokenizer) as through
 * `apply_chat_template`, and the reply span Hindsight trains on (`encodeResponse`) is exactly
 * the reply's tokens as transformers cuts them: the prompt is `apply_chat_template(prompt,
 * add_generation_prompt=True)`'s ids, and prompt + span is the whole conversation's ids (for
 * a DeepSeek-R1 style template, which drops a rendered reply's reasoning, and for Mistral's,
 * which writes the system message into the last user turn only while it is last, the prompt's
 * text continued by the reply, as generation writes it).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatTokenizer, type ChatMessage, type Reply } from '../../src-main/model/tokenizer.js';
import { deepSeekR1Template, writeRealTokenizer, type RealTokenizer } from '../../tools/real-tokenizers.js';
import { interopPython, pythonEnv } from './python.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-interop-templates-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const llama31Template = fs.readFileSync(path.join(here, '../model/fixtures/templates/llama-3.1-instruct.jinja'), 'utf8');
const gemma2Template = fs.readFileSync(path.join(here, '../model/fixtures/templates/gemma-2-it.jinja'), 'utf8');
const fixtureTemplate = (name: string) => fs.readFileSync(path.join(here, '../model/fixtures/templates', name), 'utf8');
const CHECKPOINTS: { name: string; from: RealTokenizer; template?: string; toolUse?: string }[] = [
  { name: 'qwen3', from: 'qwen3' },
  { name: 'qwen2.5', from: 'qwen2.5' },
  { name: 'llama-3.1', from: 'llama3.2', template: llama31Template },
  { name: 'llama-3.2', from: 'llama3.2' },
  { name: 'deepseek-r1', from: 'deepseek', template: deepSeekR1Template() },
  { name: 'deepseek-v3', from: 'deepseek' },
  { name: 'mistral-nemo', from: 'mistral-nemo' },
  { name: 'gemma-3', from: 'gemma3' },
  // Gemma 2's template on Gemma 3's files (the same turn markers).
  { name: 'gemma-2', from: 'gemma3', template: gemma2Template },
  // Mistral Small 3.2's template (each call `[TOOL_CALLS]name[CALL_ID]id[ARGS]{…}`) on Nemo's files.
  { name: 'mistral-small-3.2', from: 'mistral-nemo', template: fixtureTemplate('mistral-small-3.2.jinja') },
  // A default and Hermes 3's `tool_use` template, named in a list as Hermes' tokenizer_config.json
  // has them: transformers renders with tool_use whenever tools are given (Qwen2.5's files and
  // template as the default: ChatML, as Hermes 3's own).
  { name: 'hermes-3', from: 'qwen2.5', toolUse: fixtureTemplate('hermes-3-tool-use.jinja') },
];
/** A checkpoint's folder; with `toolUse`, its chat_template a list of the default and `tool_use`. */
function writeCheckpoint(c: (typeof CHECKPOINTS)[number]): string {
  const dir = writeRealTokenizer(path.join(root, c.name), c.from, c.template);
  if (c.toolUse === undefined) return dir;
  const file = path.join(dir, 'tokenizer_config.json');
  const config = JSON.parse(fs.readFileSync(file, 'utf8'));
  config.chat_template = [{ name: 'default', template: config.chat_template }, { name: 'tool_use', template: c.toolUse }];
  fs.writeFileSync(file, JSON.stringify(config));
  return dir;
}
const dirs = Object.fromEntries(CHECKPOINTS.map((c) => [c.name, writeCheckpoint(c)]));
const tokenizers = Object.fromEntries(CHECKPOINTS.map((c) => [c.name, ChatTokenizer.load(dirs[c.name]!)]));

// ---- conversations -----------------------------------------------------------------------

const TOOLS = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
}];
/** The tool call as the app stores it: OpenAI wire form, arguments as a JSON string. */
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const SYSTEM_MULTI_TURN: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'Weather in Paris? Café «ouvert» — 18°C?' },
];
const NO_SYSTEM: ChatMessage[] = SYSTEM_MULTI_TURN.slice(1);
const TOOL_TURNS: ChatMessage[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: '', tool_calls: [CALL] },
  { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' },
];
const PAST_REASONING: ChatMessage[] = [
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: '<think>\nA greeting.\n</think>\n\nHello!' },
  { role: 'user', content: 'Weather in Paris?' },
];
/** A multi-step tool turn whose reasoning is in reasoning_content (Qwen3 keeps it after the last user query). */
const REASONING_TOOL_TURN: ChatMessage[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: '', reasoning_content: 'Need the weather.', tool_calls: [CALL] },
  { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' },
];
const CONVERSATIONS: Record<string, ChatMessage[]> = {
  'system, multi-turn': SYSTEM_MULTI_TURN, 'no system': NO_SYSTEM, 'tool call and result': TOOL_TURNS, 'past reasoning': PAST_REASONING, 'reasoning_content in a tool turn': REASONING_TOOL_TURN,
};
/** Mistral's templates take tool-call ids of exactly 9 characters (and raise on others: test/model/real-templates.test.ts). */
const withNineCharacterIds = (messages: ChatMessage[]): ChatMessage[] => messages.map((m) => ({
  ...m, ...(Array.isArray(m.tool_calls) ? { tool_calls: m.tool_calls.map((c: object) => ({ ...c, id: 'call00001' })) } : {}), ...(m.tool_call_id ? { tool_call_id: 'call00001' } : {}),
}));
/**
 * Gemma 3's template has no tool role (it raises: test/model/gemma-template.test.ts); Gemma 2's no
 * system role either (transformers raises; Hindsight renders it as Gemma 3 does, tested there).
 */
const TOOL_FREE = ['system, multi-turn', 'no system', 'past reasoning'];
const GEMMA2_CONVERSATIONS = ['no system', 'past reasoning'];
const conversationsOf = (checkpoint: string): Record<string, ChatMessage[]> =>
  checkpoint.startsWith('mistral') ? Object.fromEntries(Object.entries(CONVERSATIONS).map(([what, m]) => [what, withNineCharacterIds(m)]))
    : checkpoint === 'gemma-3' ? Object.fromEntries(TOOL_FREE.map((what) => [what, CONVERSATIONS[what]!]))
      : checkpoint === 'gemma-2' ? Object.fromEntries(GEMMA2_CONVERSATIONS.map((what) => [what, CONVERSATIONS[what]!])) : CONVERSATIONS;

interface Variant { label: string; tools?: unknown[]; extra?: Record<string, unknown> }
const DATE = { date_string: '02 Jan 2025' };
/** The renders each checkpoint is compared on (Llama's date fixed, so both sides write the same day). */
const VARIANTS: Record<string, Variant[]> = {
  qwen3: [{ label: 'thinking (default)' }, { label: 'thinking on', extra: { enable_thinking: true } }, { label: 'thinking off', extra: { enable_thinking: false } }, { label: 'tools', tools: TOOLS }],
  'qwen2.5': [{ label: 'plain' }, { label: 'tools', tools: TOOLS }],
  'llama-3.1': [{ label: 'plain', extra: DATE }, { label: 'tools', tools: TOOLS, extra: DATE }],
  // 'today': both sides write today's date through strftime_now (Python's C locale, "%d %b %Y")
  'llama-3.2': [{ label: 'plain', extra: DATE }, { label: 'tools', tools: TOOLS, extra: DATE }, { label: 'today' }],
  'deepseek-r1': [{ label: 'plain' }],
  'deepseek-v3': [{ label: 'plain' }],
  'mistral-nemo': [{ label: 'plain' }, { label: 'tools', tools: TOOLS }],
  'gemma-3': [{ label: 'plain' }],
  'gemma-2': [{ label: 'plain' }],
  // 'today': Mistral Small 3.2's default system message writes today's date (strftime_now)
  'mistral-small-3.2': [{ label: 'today' }, { label: 'tools', tools: TOOLS }],
  'hermes-3': [{ label: 'plain' }, { label: 'tools', tools: TOOLS }],
};

interface Render { dir: string; messages: ChatMessage[]; tools?: unknown[]; add_generation_prompt: boolean; extra: Record<string, unknown> }
interface Encode { dir: string; text: string }
interface RenderCase { label: string; checkpoint: string; messages: ChatMessage[]; variant: Variant; addGenerationPrompt: boolean }

const renderCases: RenderCase[] = [];
for (const c of CHECKPOINTS) {
  for (const variant of VARIANTS[c.name]!) {
    for (const [what, messages] of Object.entries(conversationsOf(c.name))) {
      for (const addGenerationPrompt of [true, false]) {
        renderCases.push({ label: `${c.name} ${variant.label}: ${what}, add_generation_prompt ${addGenerationPrompt}`, checkpoint: c.name, messages, variant, addGenerationPrompt });
      }
    }
  }
}

/** A reply that calls a tool, and one that says something first (the app stores both as an assistant turn with tool calls). */
const CALL_REPLY: ChatMessage = { role: 'assistant', content: '', tool_calls: [CALL] };
const TEXT_AND_CALL_REPLY: ChatMessage = { role: 'assistant', content: 'Let me check.', tool_calls: [CALL] };
const toolsVariant = (checkpoint: string): Variant => VARIANTS[checkpoint]!.find((v) => v.tools)!;

/** Replies Hindsight trains on, after each checkpoint's conversations. */
const DEEPSEEK_CALL_END = '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>';
const REPLIES: { checkpoint: string; variant: Variant; messages: ChatMessage[]; reply: Reply; opensThink?: boolean; rewritesHistory?: boolean; addsEnd?: string }[] = [
  ...['qwen3', 'qwen2.5', 'llama-3.1', 'llama-3.2', 'deepseek-v3'].flatMap((checkpoint) =>
    VARIANTS[checkpoint]!.filter((v) => !v.extra?.enable_thinking || checkpoint !== 'qwen3').flatMap((variant) => [
      { checkpoint, variant, messages: SYSTEM_MULTI_TURN, reply: 'Sunny, 18°C.' },
      { checkpoint, variant, messages: TOOL_TURNS, reply: 'It is 18°C in Paris.' },
    ])),
  { checkpoint: 'qwen3', variant: VARIANTS.qwen3![0]!, messages: PAST_REASONING, reply: '<think>\nCheck June.\n</think>\n\nSunny.' },
  { checkpoint: 'qwen3', variant: VARIANTS.qwen3![1]!, messages: TOOL_TURNS, reply: '<think>\nGot it.\n</think>\n\nIt is 18°C.' },
  { checkpoint: 'qwen3', variant: VARIANTS.qwen3![2]!, messages: SYSTEM_MULTI_TURN, reply: 'Sunny.' },
  { checkpoint: 'qwen3', variant: VARIANTS.qwen3![0]!, messages: REASONING_TOOL_TURN, reply: '<think>\nGot 18.\n</think>\n\nIt is 18°C.' },
  { checkpoint: 'deepseek-r1', variant: VARIANTS['deepseek-r1']![0]!, messages: SYSTEM_MULTI_TURN, reply: '<think>\nParis in June.\n</think>\n\nSunny.', opensThink: true },
  { checkpoint: 'deepseek-r1', variant: VARIANTS['deepseek-r1']![0]!, messages: SYSTEM_MULTI_TURN, reply: 'Sunny.', opensThink: true },
  ...VARIANTS['mistral-nemo']!.flatMap((variant) => [
    { checkpoint: 'mistral-nemo', variant, messages: SYSTEM_MULTI_TURN, reply: 'Sunny, 18°C.', rewritesHistory: true },
    { checkpoint: 'mistral-nemo', variant, messages: NO_SYSTEM, reply: 'Sunny, 18°C.' },
    { checkpoint: 'mistral-nemo', variant, messages: withNineCharacterIds(TOOL_TURNS), reply: 'It is 18°C in Paris.' },
  ]),
  { checkpoint: 'gemma-3', variant: VARIANTS['gemma-3']![0]!, messages: SYSTEM_MULTI_TURN, reply: 'Sunny, 18°C.' },
  { checkpoint: 'gemma-3', variant: VARIANTS['gemma-3']![0]!, messages: NO_SYSTEM, reply: 'Sunny, 18°C.' },
  { checkpoint: 'gemma-2', variant: VARIANTS['gemma-2']![0]!, messages: NO_SYSTEM, reply: 'Sunny, 18°C.' },
  // Replies that call tools, with the tools offered: the span is the call as each template writes it.
  ...['qwen3', 'qwen2.5', 'llama-3.1', 'llama-3.2'].map((checkpoint) => ({ checkpoint, variant: toolsVariant(checkpoint), messages: SYSTEM_MULTI_TURN, reply: CALL_REPLY })),
  ...['qwen3', 'qwen2.5'].map((checkpoint) => ({ checkpoint, variant: toolsVariant(checkpoint), messages: SYSTEM_MULTI_TURN, reply: TEXT_AND_CALL_REPLY })),
  { checkpoint: 'mistral-nemo', variant: toolsVariant('mistral-nemo'), messages: NO_SYSTEM, reply: withNineCharacterIds([CALL_REPLY])[0]! },
  { checkpoint: 'mistral-nemo', variant: toolsVariant('mistral-nemo'), messages: SYSTEM_MULTI_TURN, reply: withNineCharacterIds([CALL_REPLY])[0]!, rewritesHistory: true },
  ...VARIANTS['mistral-small-3.2']!.flatMap((variant) => [
    { checkpoint: 'mistral-small-3.2', variant, messages: SYSTEM_MULTI_TURN, reply: 'Sunny, 18°C.' },
    { checkpoint: 'mistral-small-3.2', variant, messages: withNineCharacterIds(TOOL_TURNS), reply: 'It is 18°C in Paris.' },
  ]),
  // (Its template writes a reply with calls as the calls alone: text before them is not rendered.)
  { checkpoint: 'mistral-small-3.2', variant: toolsVariant('mistral-small-3.2'), messages: NO_SYSTEM, reply: withNineCharacterIds([CALL_REPLY])[0]! },
  // Hermes' tool_use template ends a tool result with "\n" only when a turn follows it: the history
  // renders otherwise once the reply follows, and the reply trains after the prompt as generated.
  ...VARIANTS['hermes-3']!.map((variant) => ({ checkpoint: 'hermes-3', variant, messages: TOOL_TURNS, reply: 'It is 18°C in Paris.', rewritesHistory: variant.tools !== undefined })),
  { checkpoint: 'hermes-3', variant: toolsVariant('hermes-3'), messages: SYSTEM_MULTI_TURN, reply: CALL_REPLY },
  // DeepSeek's templates write a single call with no end (<｜tool▁calls▁end｜> comes only after a
  // second): Hindsight adds it and the end of turn, so the model learns to stop (docs/design.md
  // §Tool-call dialects); R1's after closing the think block its prompt opened.
  { checkpoint: 'deepseek-v3', variant: VARIANTS['deepseek-v3']![0]!, messages: SYSTEM_MULTI_TURN, reply: CALL_REPLY, addsEnd: DEEPSEEK_CALL_END },
  { checkpoint: 'deepseek-r1', variant: VARIANTS['deepseek-r1']![0]!, messages: SYSTEM_MULTI_TURN, reply: CALL_REPLY, opensThink: true },
];
const replyMessage = (reply: Reply): ChatMessage => (typeof reply === 'string' ? { role: 'assistant', content: reply } : reply);

// ---- transformers' side, in one Python run ---------------------------------------------------

const render = (checkpoint: string, messages: ChatMessage[], variant: Variant, addGenerationPrompt: boolean): Render => ({
  dir: dirs[checkpoint]!,
  // transformers' documented form of a tool call: arguments as a dict (Hindsight parses the stored
  // JSON string into one); and where the template asks for another (DeepSeek's: content none and
  // the arguments' text), that form, as Hindsight gives it to the template.
  messages: tokenizers[checkpoint]!.messagesForTemplate(messages, variant.tools),
  ...(variant.tools ? { tools: variant.tools } : {}),
  add_generation_prompt: addGenerationPrompt,
  extra: variant.extra ?? {},
});

interface Spans { prompt: number; full: number; span?: number; whole?: number; end?: number }
const requests: (Render | Encode)[] = [];
const renderAt = renderCases.map((c) => requests.push(render(c.checkpoint, c.messages, c.variant, c.addGenerationPrompt)) - 1);
const replyAt: Spans[] = REPLIES.map((r) => {
  const tok = tokenizers[r.checkpoint]!;
  const options = { ...(r.variant.tools ? { tools: r.variant.tools } : {}), ...(r.variant.extra ? { extra: r.variant.extra } : {}) };
  const prompt = requests.push(render(r.checkpoint, r.messages, r.variant, true)) - 1;
  const full = requests.push(render(r.checkpoint, [...r.messages, replyMessage(r.reply)], r.variant, false)) - 1;
  if (r.addsEnd) return { prompt, full, end: requests.push({ dir: dirs[r.checkpoint]!, text: r.addsEnd }) - 1 };
  if (!r.opensThink && !r.rewritesHistory) return { prompt, full };
  // R1: the reference is transformers' prompt ids followed by its ids of the reply as generation
  // writes it after the opened <think> (the rendered conversation has no reasoning to compare with).
  // Mistral with a system message: the same, the rendered conversation having no system message.
  const row = tok.encodeResponse(r.messages, r.reply, options);
  const text = tok.decode(row.inputIds.slice(row.responseStart), false);
  const whole = tok.applyChatTemplate(r.messages, { addGenerationPrompt: true, ...options }) + text;
  return { prompt, full, span: requests.push({ dir: dirs[r.checkpoint]!, text }) - 1, whole: requests.push({ dir: dirs[r.checkpoint]!, text: whole }) - 1 };
});

function transformersSide(): { text: string; ids: number[] }[] {
  if (!interopPython) return [];
  const started = Date.now();
  const r = spawnSync(interopPython, [path.join(here, 'py', 'chat_templates.py')], { input: JSON.stringify(requests), env: pythonEnv(), encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`chat_templates.py failed:\n${r.stderr}`);
  console.log(`transformers rendered ${requests.length} requests in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return JSON.parse(r.stdout);
}
const reference = transformersSide();

describe.skipIf(!interopPython)('chat templates: Hindsight renders and tokenizes as transformers does', () => {
  it.each(renderCases.map((c, i) => ({ ...c, i })))('$label', ({ checkpoint, messages, variant, addGenerationPrompt, i }) => {
    const tok = tokenizers[checkpoint]!;
    const text = tok.applyChatTemplate(messages, { addGenerationPrompt, ...(variant.tools ? { tools: variant.tools } : {}), ...(variant.extra ? { extra: variant.extra } : {}) });
    const expected = reference[renderAt[i]!]!;
    expect(text).toBe(expected.text);
    expect(tok.encode(text)).toEqual(expected.ids);
  });

  it('the cases cover what they claim (generation prompts differ, tools and thinking change the text)', () => {
    const at = (label: string) => reference[renderAt[renderCases.findIndex((c) => c.label === label)]!]!.text;
    expect(at('qwen3 thinking off: system, multi-turn, add_generation_prompt true')).toMatch(/<think>\n\n<\/think>\n\n$/);
    expect(at('qwen3 tools: system, multi-turn, add_generation_prompt true')).toContain('<tools>');
    expect(at('llama-3.1 tools: tool call and result, add_generation_prompt true')).toContain('{"name": "get_weather", "parameters": {"city": "Paris"}}');
    expect(at('deepseek-r1 plain: no system, add_generation_prompt true')).toMatch(/<think>\n$/);
    expect(at('qwen2.5 plain: no system, add_generation_prompt false')).not.toMatch(/assistant\n$/);
    expect(at('qwen3 thinking (default): reasoning_content in a tool turn, add_generation_prompt true')).toContain('<think>\nNeed the weather.\n</think>');
    expect(at('llama-3.2 today: no system, add_generation_prompt true')).toMatch(/Today Date: \d{2} [A-Z][a-z]{2} \d{4}\n/);
    expect(at('mistral-small-3.2 tools: tool call and result, add_generation_prompt true')).toMatch(/\[TOOL_CALLS\]get_weather\[CALL_ID\]call00001\[ARGS\]\{"city": "Paris"\}/);
    expect(at('hermes-3 tools: no system, add_generation_prompt true')).toContain('You are a function calling AI model');
    expect(at('hermes-3 plain: no system, add_generation_prompt true')).not.toContain('function calling');
    // DeepSeek's templates write a past call (given content none, not '': an empty reply otherwise)
    expect(at('deepseek-v3 plain: tool call and result, add_generation_prompt true')).toContain('<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>');
  });
});

describe.skipIf(!interopPython)('the reply span Hindsight trains is exactly the reply\'s tokens', () => {
  const replyLabel = (reply: Reply) => (typeof reply === 'string' ? JSON.stringify(reply) : `a tool call${reply.content ? ` after ${JSON.stringify(reply.content)}` : ''}`);
  it.each(REPLIES.map((r, i) => ({ ...r, i, label: `${r.checkpoint} ${r.variant.label}: ${replyLabel(r.reply)}${r.rewritesHistory ? ' after a system message' : ''}` })))('$label', ({ checkpoint, variant, messages, reply, opensThink, rewritesHistory, addsEnd, i }) => {
    const tok = tokenizers[checkpoint]!;
    const row = tok.encodeResponse(messages, reply, { ...(variant.tools ? { tools: variant.tools } : {}), ...(variant.extra ? { extra: variant.extra } : {}) });
    const at = replyAt[i]!;
    const prompt = reference[at.prompt]!.ids;
    expect(row.inputIds.slice(0, row.responseStart)).toEqual(prompt);
    const expected = opensThink || rewritesHistory ? [...prompt, ...reference[at.span!]!.ids] : reference[at.full]!.ids;
    expect(row.inputIds).toEqual(addsEnd ? [...expected, ...reference[at.end!]!.ids] : expected);
    // R1's call: what follows the closed think block is the call as transformers renders the conversation with it
    if (opensThink && typeof reply !== 'string') {
      const call = reference[at.span!]!.text.replace(/^\n<\/think>\n\n/, '').replace(DEEPSEEK_CALL_END, '');
      expect(call).toMatch(/^<｜tool▁calls▁begin｜>/);
      expect(reference[at.full]!.text.endsWith(call)).toBe(true);
    }
    // the reply as transformers renders the conversation with it: that conversation ends with the span
    if (rewritesHistory) expect(reference[at.full]!.text.endsWith(reference[at.span!]!.text)).toBe(true);
    // the span: at least the reply's text, and it ends with the end-of-turn token the model must learn to write
    const span = row.inputIds.slice(row.responseStart);
    expect(span.length).toBeGreaterThan(1);
    expect(tok.eosTokenIds).toContain(span.at(-1) === tok.encode('\n').at(-1) ? span.at(-2) : span.at(-1));
    const text = replyMessage(reply).content;
    if (!opensThink) expect(tok.decode(span, false)).toContain(text.replace(/^<think>\n[\s\S]*<\/think>\n\n/, ''));
    if (typeof reply !== 'string') expect(tok.decode(span, false)).toMatch(/get_weather[\s\S]*Paris/);
    // where the history was rewritten, the span is still the reply and its end of turn alone (Mistral's </s>, ChatML's <|im_end|>)
    if (rewritesHistory && typeof reply === 'string') expect(tok.decode(span, false)).toMatch(new RegExp(`^${reply}(</s>|<\\|im_end\\|>\\n)$`));
  });

  // Deliberate (docs/design.md §Interoperability): after R1's "<think>\n" a reply without reasoning
  // starts "\n</think>", and tokenizing prompt + reply as one text merges the two newlines into one
  // token the prompt never ends with. Hindsight keeps the prompt's tokens, as generation sees them.
  it('deepseek-r1, plain reply: one-text tokenization would merge across the prompt/reply boundary; Hindsight does not', () => {
    const i = REPLIES.findIndex((r) => r.checkpoint === 'deepseek-r1' && r.reply === 'Sunny.');
    const { prompt, span, whole } = replyAt[i]!;
    const oneText = reference[whole!]!.ids;
    expect(oneText.slice(0, reference[prompt]!.ids.length)).not.toEqual(reference[prompt]!.ids);
    expect(tokenizers['deepseek-r1']!.encodeResponse(SYSTEM_MULTI_TURN, 'Sunny.').inputIds).toEqual([...reference[prompt]!.ids, ...reference[span!]!.ids]);
  });
});
