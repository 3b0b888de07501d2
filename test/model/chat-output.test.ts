// Reasoning and tool calls in generated replies.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { mayBeBareCall, parseCutReply, parseReply, parseToolCallList, parseToolCalls, splitReasoning, splitReasoningText } from '../../src-main/model/chat-output.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

// A toy vocabulary: 1 = <think>, 2 = </think>, others are letters.
const toy = { thinkStartId: 1, thinkEndId: 2, decode: (ids: number[]) => ids.map((i) => (i === 1 ? '<think>' : i === 2 ? '</think>' : String.fromCharCode(96 + i))).join('') };

describe('reasoning', () => {
  it('splits by token ids', () => {
    expect(splitReasoning([1, 3, 4, 2, 5, 6], toy)).toEqual({ reasoning: 'cd', answer: 'ef' });
    // Qwen3 opens <think> in the prompt: a lone </think> closes reasoning from the start.
    expect(splitReasoning([3, 2, 5], toy)).toEqual({ reasoning: 'c', answer: 'e' });
    // Cut off mid-thought.
    expect(splitReasoning([1, 3, 4], toy)).toEqual({ reasoning: 'cd', answer: '' });
    expect(splitReasoning([3, 4], toy)).toEqual({ answer: 'cd' });
  });

  it('an empty part through a real tokenizer is empty text: <think></think>, and a reply cut right after </think>', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-think-'));
    try {
      const tok = ChatTokenizer.load(writeTinyModel(dir, { family: 'qwen3' }).dir);
      const think = { thinkStartId: tok.thinkStartId, thinkEndId: tok.thinkEndId, decode: (ids: number[]) => tok.decode(ids) };
      const [open, close] = [tok.thinkStartId!, tok.thinkEndId!];
      const answer = tok.encode('Yes.');
      expect(tok.decode([])).toBe('');
      expect(parseReply([open, close, ...answer], think)).toMatchObject({ reasoning: '', content: 'Yes.' });
      expect(parseReply([open, ...tok.encode('Plan.'), close], think)).toMatchObject({ reasoning: 'Plan.', content: '' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('splits by text when the tokenizer has no think tokens', () => {
    const noIds = { decode: () => '<think>\nplan it\n</think>\n\nThe answer.' };
    expect(splitReasoning([9], noIds)).toEqual({ reasoning: 'plan it', answer: 'The answer.' });
    expect(splitReasoningText('plain')).toEqual({ answer: 'plain' });
    expect(splitReasoningText('so</think>done')).toEqual({ reasoning: 'so', answer: 'done' });
  });
});

describe('tool calls', () => {
  it('parses Hermes blocks into OpenAI-format calls', () => {
    const text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>{"name":"now"}</tool_call>';
    const r = parseToolCalls(text);
    expect(r.content).toBe('Let me check.');
    expect(r.errors).toEqual([]);
    expect(r.toolCalls).toEqual([
      { id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_1', type: 'function', function: { name: 'now', arguments: '{}' } },
    ]);
  });

  it('turns invalid JSON, a missing name and an unterminated block into error entries', () => {
    const r = parseToolCalls('a<tool_call>{"name": oops}</tool_call>b<tool_call>{"arguments":{}}</tool_call>c<tool_call>{"name":"x"');
    expect(r.content).toBe('abc');
    expect(r.toolCalls).toEqual([]);
    expect(r.errors.map((e) => e.error)).toEqual([
      expect.stringMatching(/^invalid JSON in <tool_call>: /),
      '<tool_call> JSON has no "name" string',
      'unterminated <tool_call> block (no </tool_call>)',
    ]);
    expect(r.errors[0]!.raw).toBe('{"name": oops}');
  });

  it("reads Mistral's list after [TOOL_CALLS]: ids of 9 characters kept, others made; bad JSON and nameless calls as errors", () => {
    expect(parseToolCallList(' [{"name": "w", "arguments": {"q": 1}, "id": "abcdefghi"}, {"name": "now", "id": "x"}, {"arguments": {}}]')).toEqual({
      toolCalls: [
        { id: 'abcdefghi', type: 'function', function: { name: 'w', arguments: '{"q":1}' } },
        { id: 'call00001', type: 'function', function: { name: 'now', arguments: '{}' } },
      ],
      errors: [{ error: 'a call after the tool-call token has no "name" string', raw: '{"arguments":{}}' }],
    });
    expect(parseToolCallList('{"name": "now"}').toolCalls).toEqual([{ id: 'call00000', type: 'function', function: { name: 'now', arguments: '{}' } }]);
    expect(parseToolCallList('[{"name": "w", "argu').errors[0]!.error).toMatch(/^invalid JSON after the tool-call token: /);
  });

  it('parseReply splits at the [TOOL_CALLS] token only for a tokenizer that has one', () => {
    const pieces = ['Checking. ', '<tool_call>{"name":"h"}</tool_call>', '[{"name": "w", "arguments": {}}]'];
    const decode = (ids: number[]) => ids.map((i) => pieces[i] ?? '').join(''); // id 9 stands for [TOOL_CALLS], a special token decode leaves out
    expect(parseReply([0, 9, 2], { toolCallsId: 9, decode })).toEqual({
      content: 'Checking.', reasoning: undefined, toolCalls: [{ id: 'call00000', type: 'function', function: { name: 'w', arguments: '{}' } }], toolCallErrors: [],
    });
    // Without the token, Hermes blocks as before (and a list in the text is text).
    expect(parseReply([0, 1, 2], { decode }).toolCalls.map((c) => c.function.name)).toEqual(['h']);
  });

  it("reads Llama 3.1+'s bare JSON calls, only where tools were offered (bareCall 'json'), as vLLM's llama3_json does", () => {
    const reply = (text: string, offered = true) => parseReply([1], { decode: () => text, ...(offered ? { bareCall: 'json' as const } : {}) });
    expect(reply(' {"name": "get_weather", "parameters": {"city": "Paris"}}\n')).toEqual({
      content: '', reasoning: undefined, toolCalls: [{ id: 'call00000', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }], toolCallErrors: [],
    });
    // Several joined by ";" (one inside a string is text), `arguments` for `parameters`.
    expect(reply('{"name": "a", "parameters": {"q": "x; y"}}; {"name": "b", "arguments": {}}').toolCalls.map((c) => [c.id, c.function.name, c.function.arguments]))
      .toEqual([['call00000', 'a', '{"q":"x; y"}'], ['call00001', 'b', '{}']]);
    // JSON that is not a call, text around it, or no tools offered: the answer as it is.
    for (const text of ['{"answer": 42}', '{"name": "a", "parameters": [1]}', 'Sure: {"name": "a", "parameters": {}}', '{"name": "a", "parameters": {}']) {
      expect(reply(text)).toMatchObject({ content: text, toolCalls: [] });
    }
    expect(reply('{"name": "a", "parameters": {}}', false)).toMatchObject({ content: '{"name": "a", "parameters": {}}', toolCalls: [] });
    // Hermes blocks still win where a model writes them.
    expect(reply('<tool_call>{"name":"h"}</tool_call>').toolCalls.map((c) => c.id)).toEqual(['call_0']);
  });

  it("reads GLM-4's call, a name line and its JSON arguments, only where tools were offered (bareCall 'name-line')", () => {
    const reply = (text: string, offered = true) => parseReply([1], { decode: () => text, ...(offered ? { bareCall: 'name-line' as const } : {}) });
    expect(reply('get_weather\n{"city": "Paris"}')).toEqual({
      content: '', reasoning: undefined, toolCalls: [{ id: 'call00000', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }], toolCallErrors: [],
    });
    // An answer (GLM-4 starts one with a newline), a one-word answer, JSON that is not an object, text after it, no tools offered: text.
    for (const text of ['\nIt is sunny.', 'Sunny', 'get_weather\n[1, 2]', 'get_weather\n{"city": "Paris"} and more', 'get weather\n{}']) {
      expect(reply(text)).toMatchObject({ content: text.trim(), toolCalls: [] });
    }
    expect(reply('get_weather\n{"city": "Paris"}', false)).toMatchObject({ toolCalls: [] });
  });

  it('holds a streamed answer while it may still be a bare call of the dialect', () => {
    expect(['{"na', ' {"name"', 'Sure {'].map((a) => mayBeBareCall('json', a))).toEqual([true, true, false]);
    expect(['get_wea', 'get_weather\n', 'get_weather\n{"ci', 'It is', 'get_weather\nSunny'].map((a) => mayBeBareCall('name-line', a))).toEqual([true, true, true, false, false]);
    expect(mayBeBareCall(undefined, '{"name"')).toBe(false);
  });

  it("Granite 3's calls after its <|tool_call|> token read as Mistral's after [TOOL_CALLS]", () => {
    const pieces = ['', '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'];
    expect(parseReply([0, 1], { toolCallsId: 0, decode: (ids) => ids.map((i) => pieces[i]).join('') }).toolCalls)
      .toEqual([{ id: 'call00000', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
  });

  it("a reply a stop string cut keeps the calls after Mistral's [TOOL_CALLS], which its text has lost", () => {
    const pieces = ['Checking. ', '', '[{"name": "w", "arguments": {}}]', ' Observation: more'];
    const tok = { toolCallsId: 1, decode: (ids: number[]) => ids.map((i) => pieces[i]).join('') };
    expect(parseCutReply('Checking. [{"name": "w", "arguments": {}}]', [0, 1, 2, 3], tok)).toEqual({
      content: 'Checking.', reasoning: undefined, toolCalls: [{ id: 'call00000', type: 'function', function: { name: 'w', arguments: '{}' } }], toolCallErrors: [],
    });
    // Cut before the token: text only.
    expect(parseCutReply('Check', [0, 1, 2, 3], tok)).toMatchObject({ content: 'Check', toolCalls: [] });
    // No such token: as the text says (a Hermes block is still a call).
    expect(parseCutReply('<tool_call>{"name":"h"}</tool_call>', [5], { decode: () => '' }).toolCalls.map((c) => c.function.name)).toEqual(['h']);
  });

  it('parseReply combines both', () => {
    const tok = { decode: () => '<think>need weather</think><tool_call>{"name":"w","arguments":"{\\"q\\":1}"}</tool_call>' };
    expect(parseReply([1], tok)).toEqual({
      content: '',
      reasoning: 'need weather',
      toolCalls: [{ id: 'call_0', type: 'function', function: { name: 'w', arguments: '{"q":1}' } }],
      toolCallErrors: [],
    });
  });
});
