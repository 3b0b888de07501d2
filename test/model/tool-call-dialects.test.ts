// Tool-call dialects (src-main/model/tool-call-dialects.ts) on the families' own chat templates
// (test/model/fixtures/templates/): which dialect each template asks for, the history each
// renders (GLM-4's metadata and observation turns, Granite 3's calls in the content), the span a
// reply that calls a tool trains on, and the model's own call read back. The tokenizer is the
// tiny byte-level one with the dialects' special tokens added, so the markers are single tokens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseReply, replyTokens } from '../../src-main/model/chat-output.js';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { toolCallDialect } from '../../src-main/model/tool-call-dialects.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-dialects-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const fixture = (name: string) => fs.readFileSync(path.join(import.meta.dirname, 'fixtures/templates', name), 'utf8');
const GLM4 = fixture('glm-4-0414.jinja');
const GRANITE3 = fixture('granite-3.3-instruct.jinja');

/** The tiny tokenizer with `template` and the given special tokens added after its vocabulary. */
function tokenizerWith(name: string, template: string, specials: string[]): ChatTokenizer {
  const dir = writeTinyModel(path.join(root, name), { family: 'qwen3', numLayers: 1 }).dir;
  const tokFile = path.join(dir, 'tokenizer.json');
  const json = JSON.parse(fs.readFileSync(tokFile, 'utf8'));
  let next = Math.max(...json.added_tokens.map((t: { id: number }) => t.id)) + 1;
  for (const content of specials) json.added_tokens.push({ id: next++, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  fs.writeFileSync(tokFile, JSON.stringify(json));
  const configFile = path.join(dir, 'tokenizer_config.json');
  fs.writeFileSync(configFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(configFile, 'utf8')), chat_template: template }));
  return ChatTokenizer.load(dir);
}

const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const ASKED: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Paris?' }];
const AFTER_CALL: ChatMessage[] = [...ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' }];

describe('which dialect a template asks for', () => {
  it('by the template\'s own text', () => {
    const names = ['glm-4-0414.jinja', 'granite-3.3-instruct.jinja', 'llama-3.1-instruct.jinja', 'gemma-2-it.jinja', 'phi-3-instruct.jinja'].map((f) => toolCallDialect(fixture(f)).name);
    expect(names).toEqual(['glm4', 'granite3', 'llama3', 'hermes', 'hermes']);
    expect(toolCallDialect(undefined).name).toBe('hermes');
  });
});

describe('GLM-4: a call is an assistant turn named by its metadata, a result an observation', () => {
  const tok = tokenizerWith('glm4', GLM4, ['[gMASK]', '<sop>', '<|system|>', '<|user|>', '<|assistant|>', '<|observation|>']);

  it('renders the history in its own form, and <|observation|> ends generation', () => {
    const text = tok.applyChatTemplate(AFTER_CALL, { tools: TOOLS, addGenerationPrompt: true });
    expect(text).toContain('## get_weather');
    expect(text.endsWith('<|user|>\nWeather in Paris?<|assistant|>get_weather\n{"city": "Paris"}<|observation|>\n18°C<|assistant|>')).toBe(true);
    expect(tok.eosTokenIds).toContain(tok.tokenToId('<|observation|>'));
  });

  it('a reply that calls a tool trains on the name line and the arguments; text before it stays its own turn', () => {
    const span = (reply: ChatMessage) => {
      const row = tok.encodeResponse(ASKED, reply, { tools: TOOLS });
      return tok.decode(row.inputIds.slice(row.responseStart), false);
    };
    expect(span({ role: 'assistant', content: '', tool_calls: [CALL] })).toBe('get_weather\n{"city": "Paris"}<|observation|>');
    expect(span({ role: 'assistant', content: 'Let me check.', tool_calls: [CALL] })).toBe('\nLet me check.<|assistant|>get_weather\n{"city": "Paris"}<|observation|>');
  });

  it('a reply ends with the token that opens the next turn, which the template does not write: the model learns to stop', () => {
    // GLM-4's own fine-tuning labels one token past each reply: the next turn's role.
    const row = tok.encodeResponse(ASKED, 'Sunny.', { tools: TOOLS });
    expect(tok.decode(row.inputIds.slice(row.responseStart), false)).toBe('\nSunny.<|user|>');
    expect(row.inputIds.at(-1)).toBe(tok.tokenToId('<|user|>'));
    const afterCall = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { tools: TOOLS });
    expect(afterCall.inputIds.at(-1)).toBe(tok.tokenToId('<|observation|>'));
  });

  it('reads the call the model writes, where tools were offered', () => {
    const ids = [...tok.encode('get_weather\n{"city": "Paris"}'), tok.tokenToId('<|observation|>')!];
    const body = ids.filter((id) => !tok.eosTokenIds.includes(id));
    expect(parseReply(body, replyTokens(tok, true)).toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([['get_weather', '{"city":"Paris"}']]);
    expect(parseReply(body, replyTokens(tok, false)).toolCalls).toEqual([]);
  });
});

describe('Granite 3: a call is <|tool_call|> and a JSON list in the reply\'s content', () => {
  const tok = tokenizerWith('granite3', GRANITE3, ['<|start_of_role|>', '<|end_of_role|>', '<|end_of_text|>', '<|tool_call|>']);

  it('renders a past call into its turn\'s content, which the template alone would leave empty', () => {
    const text = tok.applyChatTemplate(AFTER_CALL, { tools: TOOLS, addGenerationPrompt: true });
    expect(text).toContain('<|start_of_role|>available_tools<|end_of_role|>');
    expect(text).toContain('<|start_of_role|>assistant<|end_of_role|><|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>18°C');
  });

  it('a reply that calls a tool trains on the marker and the list; the model\'s own call reads back', () => {
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { tools: TOOLS });
    const span = row.inputIds.slice(row.responseStart);
    expect(tok.decode(span, false)).toBe('<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|end_of_text|>\n');
    expect(tok.toolCallsId).toBe(tok.tokenToId('<|tool_call|>'));
    expect(span[0]).toBe(tok.toolCallsId);
    const body = span.filter((id) => !tok.eosTokenIds.includes(id));
    expect(parseReply(body, replyTokens(tok, true)).toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([['get_weather', '{"city":"Paris"}']]);
  });
});
