// Tool-call dialects (src-main/model/tool-call-dialects.ts) on the families' own chat templates
// (test/model/fixtures/templates/): which dialect each template asks for, the history each
// renders (GLM-4's metadata and observation turns, Granite 3's calls in the content), the span a
// reply that calls a tool trains on, and the model's own call read back. The tokenizer is the
// tiny byte-level one with the dialects' special tokens added, so the markers are single tokens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeWithThinkTags, parseReply, replyTokens } from '../../src-main/model/chat-output.js';
import { StreamText } from '../../src-main/openai/local-chat.js';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { toolCallDialect } from '../../src-main/model/tool-call-dialects.js';
import { tokenizerWith as templateTokenizer } from './template-tokenizer.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-dialects-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const fixture = (name: string) => fs.readFileSync(path.join(import.meta.dirname, 'fixtures/templates', name), 'utf8');
const GLM4 = fixture('glm-4-0414.jinja');
const GRANITE3 = fixture('granite-3.3-instruct.jinja');
// Mistral's own templates as llama.cpp keeps them (models/templates/): Mistral Small 3.2's and Ministral 3's.
const MISTRAL_SMALL_32 = fixture('mistral-small-3.2.jinja');
const MINISTRAL_3 = fixture('ministral-3-reasoning.jinja');

const tokenizerWith = (name: string, template: string, specials: string[], without: string[] = []) => templateTokenizer(root, name, template, specials, without);

const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const ASKED: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Paris?' }];
const AFTER_CALL: ChatMessage[] = [...ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' }];

describe('which dialect a template asks for', () => {
  it('by the template\'s own text', () => {
    const names = ['glm-4-0414.jinja', 'granite-3.3-instruct.jinja', 'llama-3.1-instruct.jinja', 'mistral-small-3.2.jinja', 'ministral-3-reasoning.jinja', 'phi-4-mini-instruct.jinja', 'gemma-2-it.jinja', 'phi-3-instruct.jinja'].map((f) => toolCallDialect(fixture(f)).name);
    expect(names).toEqual(['glm4', 'granite3', 'llama3', 'mistral', 'mistral', 'phi4mini', 'hermes', 'hermes']);
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

describe('Mistral v11+: each call is [TOOL_CALLS]name[ARGS]{arguments}, Mistral Small 3.2\'s with [CALL_ID]id', () => {
  const MISTRAL_SPECIALS = ['[INST]', '[/INST]', '[SYSTEM_PROMPT]', '[/SYSTEM_PROMPT]', '[AVAILABLE_TOOLS]', '[/AVAILABLE_TOOLS]', '[TOOL_RESULTS]', '[/TOOL_RESULTS]', '[TOOL_CALLS]', '[ARGS]', '[CALL_ID]', '[THINK]', '[/THINK]'];
  // Mistral's templates take only 9-character ids (longer ones are cut to their last 9, as vLLM does).
  const FIRST = { ...CALL, id: 'call_abcdef123' };
  const SECOND = { id: 'call_xyzuvw456', type: 'function', function: { name: 'get_time', arguments: '{"zone":"CET"}' } };
  const calls = (tok: ChatTokenizer, ids: number[]) =>
    parseReply(ids.filter((id) => !tok.eosTokenIds.includes(id)), replyTokens(tok, true)).toolCalls.map((c) => [c.id, c.function.name, c.function.arguments]);

  it('a reply of two calls trains on the template\'s form, and the model\'s own writing of it reads back as the same two calls', () => {
    const tok = tokenizerWith('mistral-small-32', MISTRAL_SMALL_32, MISTRAL_SPECIALS);
    expect(tok.callPartIds).toEqual({ args: tok.tokenToId('[ARGS]'), callId: tok.tokenToId('[CALL_ID]') });
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [FIRST, SECOND] }, { tools: TOOLS });
    const span = row.inputIds.slice(row.responseStart);
    expect(tok.decode(span, false)).toMatch(/^\[TOOL_CALLS\]get_weather\[CALL_ID\]abcdef123\[ARGS\]\{"city": "Paris"\}\[TOOL_CALLS\]get_time\[CALL_ID\]xyzuvw456\[ARGS\]\{"zone": "CET"\}/);
    // The ids the model wrote are kept.
    expect(calls(tok, span)).toEqual([['abcdef123', 'get_weather', '{"city":"Paris"}'], ['xyzuvw456', 'get_time', '{"zone":"CET"}']]);
  });

  it('Ministral 3 writes no id: the calls read back with ids made for them', () => {
    const tok = tokenizerWith('ministral-3', MINISTRAL_3, MISTRAL_SPECIALS);
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { tools: TOOLS });
    const span = row.inputIds.slice(row.responseStart);
    expect(tok.decode(span, false)).toMatch(/^\[TOOL_CALLS\]get_weather\[ARGS\]\{"city": ?"Paris"\}/);
    expect(calls(tok, span)).toEqual([['call00000', 'get_weather', '{"city":"Paris"}']]);
  });

  it('bad arguments, or a call with no [ARGS], are error entries, never a throw; text before the calls is the answer', () => {
    const tok = tokenizerWith('mistral-small-32-bad', MISTRAL_SMALL_32, MISTRAL_SPECIALS);
    const [marker, args] = [tok.tokenToId('[TOOL_CALLS]')!, tok.tokenToId('[ARGS]')!];
    const ids = [...tok.encode('Checking.'), marker, ...tok.encode('get_weather'), args, ...tok.encode('{"city": '), marker, ...tok.encode('get_time')];
    const parsed = parseReply(ids, replyTokens(tok, true));
    expect(parsed.content).toBe('Checking.');
    expect(parsed.toolCalls).toEqual([]);
    expect(parsed.toolCallErrors.map((e) => e.error)).toEqual([expect.stringMatching(/^invalid JSON arguments/), expect.stringMatching(/no arguments token/)]);
  });

  it('Mistral Nemo\'s JSON list after [TOOL_CALLS] still reads, [ARGS] in the vocabulary or not', () => {
    const tok = tokenizerWith('mistral-list', MISTRAL_SMALL_32, MISTRAL_SPECIALS);
    const ids = [tok.tokenToId('[TOOL_CALLS]')!, ...tok.encode('[{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}]')];
    expect(calls(tok, ids)).toEqual([['abcdefghi', 'get_weather', '{"city":"Paris"}']]);
  });
});

describe('Mistral\'s reasoning models: [THINK]…[/THINK] is reasoning, though decoding drops both tokens', () => {
  const SPECIALS = ['[INST]', '[/INST]', '[SYSTEM_PROMPT]', '[/SYSTEM_PROMPT]', '[AVAILABLE_TOOLS]', '[/AVAILABLE_TOOLS]', '[TOOL_RESULTS]', '[/TOOL_RESULTS]', '[TOOL_CALLS]', '[ARGS]', '[THINK]', '[/THINK]'];
  const NO_QWEN_THINK = ['<think>', '</think>']; // Mistral's vocabularies have no <think>

  it('a reply splits into reasoning and answer, in one piece and as a stream', () => {
    const tok = tokenizerWith('ministral-3-think', MINISTRAL_3, SPECIALS, NO_QWEN_THINK);
    expect([tok.thinkStartId, tok.thinkEndId]).toEqual([tok.tokenToId('[THINK]'), tok.tokenToId('[/THINK]')]);
    const ids = [tok.tokenToId('[THINK]')!, ...tok.encode('Paris is in France.'), tok.tokenToId('[/THINK]')!, ...tok.encode('Sunny, 18°C.')];
    expect(tok.decode(ids)).toBe('Paris is in France.Sunny, 18°C.'); // what a reader by text alone saw
    const parsed = parseReply(ids, replyTokens(tok, false));
    expect([parsed.reasoning, parsed.content]).toEqual(['Paris is in France.', 'Sunny, 18°C.']);
    const stream = new StreamText((t) => decodeWithThinkTags(tok, t), false, [], tok.eosTokenIds);
    const deltas = ids.map((id) => stream.push(id));
    expect(deltas.map((d) => d.reasoning ?? '').join('')).toBe('Paris is in France.');
    expect(deltas.map((d) => d.content ?? '').join('')).toBe('Sunny, 18°C.');
  });

  it('a Mistral template that never writes [THINK] keeps the tokens unused (Mistral Small 3.2)', () => {
    const tok = tokenizerWith('mistral-small-32-think', MISTRAL_SMALL_32, [...SPECIALS, '[CALL_ID]'], NO_QWEN_THINK);
    expect([tok.thinkStartId, tok.thinkEndId]).toEqual([undefined, undefined]);
  });
});

describe('Phi-4-mini: the tools a JSON string on the system message, a call <|tool_call|>[…]<|/tool_call|>', () => {
  // Its tokenizer_config.json's template (fixtures/templates/phi-4-mini-instruct.jinja), which reads
  // tools only from the system message, as Microsoft's function-calling examples pass them.
  const tok = tokenizerWith('phi4mini', fixture('phi-4-mini-instruct.jinja'), ['<|system|>', '<|user|>', '<|assistant|>', '<|end|>', '<|tool|>', '<|/tool|>', '<|tool_call|>', '<|/tool_call|>']);

  it('shows the tools on the system message, one opened where there is none, and writes a past call into its turn', () => {
    const text = tok.applyChatTemplate(AFTER_CALL, { tools: TOOLS, addGenerationPrompt: true });
    expect(text.startsWith('<|system|>Be brief.<|tool|>[{"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]<|/tool|><|end|>')).toBe(true);
    expect(text).toContain('<|assistant|><|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|/tool_call|><|end|><|tool|>18°C<|end|>');
    expect(tok.applyChatTemplate([{ role: 'user', content: 'Hi' }], { tools: TOOLS, addGenerationPrompt: true })).toMatch(/^<\|system\|><\|tool\|>\[\{"name": "get_weather"/);
    expect(tok.applyChatTemplate(ASKED, { addGenerationPrompt: true })).not.toContain('<|tool|>'); // no tools offered, none shown
  });

  it('a reply that calls a tool trains on the marker, the list and its closing token; the model\'s own call reads back', () => {
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { tools: TOOLS });
    const span = row.inputIds.slice(row.responseStart);
    expect(tok.decode(span, false)).toMatch(/^<\|tool_call\|>\[\{"name": "get_weather", "arguments": \{"city": "Paris"\}\}\]<\|\/tool_call\|><\|end\|>/);
    expect(span[0]).toBe(tok.toolCallsId);
    const body = span.filter((id) => !tok.eosTokenIds.includes(id));
    expect(parseReply(body, replyTokens(tok, true)).toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([['get_weather', '{"city":"Paris"}']]);
  });
});
