// A model's second chat template, `tool_use` (src-main/model/chat-templates.ts): transformers'
// apply_chat_template renders with it whenever tools are given, and so does ChatTokenizer.
// Hermes 3's (fixtures/templates/hermes-3-tool-use.jinja, as llama.cpp keeps it) lists the tools
// and writes calls as <tool_call> blocks, where its default, plain ChatML, shows none. Found in
// tokenizer_config.json's list of named templates, in additional_chat_templates/tool_use.jinja,
// and in a GGUF's `tokenizer.chat_template.tool_use`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseReply, replyTokens } from '../../src-main/model/chat-output.js';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-tool-use-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const HERMES_TOOL_USE = fs.readFileSync(path.join(import.meta.dirname, 'fixtures/templates/hermes-3-tool-use.jinja'), 'utf8');
const CHATML = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
// No description on the parameter: Hermes' template trims it all the same (Jinja's undefined reads as '').
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const ASKED: ChatMessage[] = [{ role: 'user', content: 'Weather in Paris?' }];
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };

/** The tiny model's tokenizer with `config`'s fields in tokenizer_config.json and `files` beside it. */
function tokenizerWith(name: string, config: Record<string, unknown>, files: Record<string, string> = {}): ChatTokenizer {
  const dir = writeTinyModel(path.join(root, name), { family: 'qwen3', numLayers: 1 }).dir;
  const configFile = path.join(dir, 'tokenizer_config.json');
  fs.writeFileSync(configFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(configFile, 'utf8')), ...config }));
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  return ChatTokenizer.load(dir);
}

describe.each([
  { form: "tokenizer_config.json's named list", tok: () => tokenizerWith('list', { chat_template: [{ name: 'default', template: CHATML }, { name: 'tool_use', template: HERMES_TOOL_USE }] }) },
  { form: 'additional_chat_templates/tool_use.jinja', tok: () => tokenizerWith('extra-file', { chat_template: CHATML }, { 'additional_chat_templates/tool_use.jinja': HERMES_TOOL_USE }) },
])('Hermes 3\'s tool_use template, from $form', ({ tok: load }) => {
  const tok = load();

  it('renders a prompt with tools through it, and one without through the default', () => {
    const withTools = tok.applyChatTemplate(ASKED, { tools: TOOLS, addGenerationPrompt: true });
    expect(withTools).toContain('<tools>');
    expect(withTools).toContain('city(str): ');
    expect(tok.applyChatTemplate(ASKED, { addGenerationPrompt: true })).toBe('<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n');
  });

  it('a reply that calls a tool trains on its <tool_call> block, which reads back as the same call', () => {
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { tools: TOOLS });
    const span = row.inputIds.slice(row.responseStart);
    expect(tok.decode(span, false)).toContain('<tool_call>');
    const calls = parseReply(span.filter((id) => !tok.eosTokenIds.includes(id)), replyTokens(tok, true)).toolCalls;
    expect(calls.map((c) => [c.function.name, c.function.arguments])).toEqual([['get_weather', '{"city":"Paris"}']]);
  });
});

it('without a tool_use template, tools go to the one template there is', () => {
  const tok = tokenizerWith('single', { chat_template: CHATML });
  expect(tok.applyChatTemplate(ASKED, { tools: TOOLS, addGenerationPrompt: true })).not.toContain('<tools>');
});

it('a list entry that is not a template is passed over, and a tool_use.jinja that is not a file is none', () => {
  const tok = tokenizerWith('odd-list', { chat_template: [{ name: 'tool_use', template: 42 }, null, { name: 'default', template: CHATML }] }, { 'additional_chat_templates/tool_use.jinja/x': '' });
  expect(tok.applyChatTemplate(ASKED, { tools: TOOLS, addGenerationPrompt: true })).toBe('<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n');
});
