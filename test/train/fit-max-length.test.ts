// The context window of a row from the database: the system turn and the latest whole turns
// that fit, then the oldest kept message cut from the left; a reply that does not fit leaves
// the sample out (counted), never cut.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { rowsFromSamples } from '../../src-main/train/batches.js';
import { windowedResponse } from '../../src-main/train/fit-max-length.js';
import { overLengthNote, overLengthReason } from '../../src-shared/training.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-window-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const tokenizer = ChatTokenizer.load(writeTinyModel(path.join(tmp, 'model'), { family: 'qwen3', numLayers: 1 }).dir);

const SYSTEM: ChatMessage = { role: 'system', content: 'Be brief.' };
const CHAT: ChatMessage[] = [
  SYSTEM,
  { role: 'user', content: 'The first question is about the weather in the mountains.' },
  { role: 'assistant', content: 'It snows there in winter.' },
  { role: 'user', content: 'The second question: is the road open?' },
  { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'roads', arguments: '{}' } }] },
  { role: 'tool', content: 'open' },
  { role: 'user', content: 'The third question: how long is the drive there from the town?' },
];
const REPLY = 'About two hours.';
const length = (messages: ChatMessage[]) => tokenizer.encodeResponse(messages, REPLY).inputIds.length;
const prompt = (r: ReturnType<typeof windowedResponse>) => {
  if (!r.fits) throw new Error(`expected a window, got ${r.why}`);
  return tokenizer.decode(r.span.inputIds.slice(0, r.span.responseStart), false);
};

describe('windowedResponse', () => {
  it('a chat that fits is rendered whole', () => {
    const r = windowedResponse(tokenizer, CHAT, REPLY, length(CHAT));
    expect(r).toMatchObject({ fits: true, cut: false, messages: CHAT });
  });

  it('keeps the system turn and the latest whole turns that fit (a tool call stays with its question)', () => {
    const lastTwo = [SYSTEM, ...CHAT.slice(3)];
    const r = windowedResponse(tokenizer, CHAT, REPLY, length(lastTwo));
    expect(r).toMatchObject({ fits: true, cut: true, messages: lastTwo });
    expect(prompt(r)).toBe(tokenizer.applyChatTemplate(lastTwo, { addGenerationPrompt: true }));
    const fewer = windowedResponse(tokenizer, CHAT, REPLY, length(lastTwo) - 1);
    expect(fewer).toMatchObject({ fits: true, messages: [SYSTEM, CHAT[6]] });
  });

  it('when the latest turn alone does not fit, its oldest words go, from the left; the system turn stays whole', () => {
    const max = length([SYSTEM, CHAT[6]!]) - 4;
    const r = windowedResponse(tokenizer, CHAT, REPLY, max);
    if (!r.fits) throw new Error('expected a window');
    expect(r.span.inputIds.length).toBeLessThanOrEqual(max);
    const text = prompt(r);
    expect(text.startsWith('<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n')).toBe(true);
    expect(text).toContain('from the town?<|im_end|>\n<|im_start|>assistant\n');
    expect(text).not.toContain('The third');
    expect(tokenizer.decode(r.span.inputIds.slice(r.span.responseStart), false)).toBe(`${REPLY}<|im_end|>\n`);
  });

  it('a reply that does not fit, or a system turn that leaves it no room, is not cut: it does not fit', () => {
    const replyTokens = tokenizer.encodeResponse(CHAT, REPLY);
    const replyLength = replyTokens.inputIds.length - replyTokens.responseStart;
    expect(windowedResponse(tokenizer, CHAT, REPLY, replyLength)).toEqual({ fits: false, why: 'reply' });
    const longSystem: ChatMessage[] = [{ role: 'system', content: 'Be brief. '.repeat(40) }, CHAT[6]!];
    expect(windowedResponse(tokenizer, longSystem, REPLY, replyLength + 20)).toEqual({ fits: false, why: 'system turn' });
  });
});

describe('rows over the window', () => {
  const sample = (turn: number, reply: string, messages = CHAT): TrainingSample => ({
    sessionId: 's', responseTurn: turn, messages, response: { role: 'assistant', content: reply }, reward: 1, hint: null, keptByAtLeastOne: false,
  } as unknown as TrainingSample);

  it('samples whose reply does not fit are skipped and counted; the others train with their window', () => {
    const max = length([SYSTEM, CHAT[6]!]) + 2;
    const long = 'the road is long '.repeat(60);
    const set = rowsFromSamples([sample(7, REPLY), sample(9, long), sample(11, long)], tokenizer, 'rl', max);
    expect(set.rows.map((r) => r.origin)).toEqual(['s/7']);
    expect(set.truncated).toBe(1);
    expect(set.skipped).toEqual({ [overLengthReason(max)]: 2 });
    expect(overLengthNote(2, 2048, 4096)).toBe('2 samples over 2,048 tokens skipped; raise --max-length (this model holds up to 4,096)');
    expect(overLengthNote(1, 2048, 4096, 'app')).toBe("1 sample over 2,048 tokens skipped; raise Max length (tokens), up to this model's 4,096, to train it");
  });

  it('advice the reader can follow: at the model\'s own positions no setting trains them, and the note says so', () => {
    for (const reader of ['cli', 'app'] as const) {
      const note = overLengthNote(1, 512, 512, reader);
      expect(note).toBe('1 sample over 512 tokens skipped; this model reads at most 512 tokens, so it cannot be trained on it (a model with more positions could)');
      expect(note).not.toMatch(/raise/);
    }
  });

  it('a hinted sample windows its teacher too, keeping the hint and the same reply tokens', () => {
    const max = length([SYSTEM, ...CHAT.slice(3)]) + 12;
    const row = rowsFromSamples([{ ...sample(7, REPLY), hint: 'Give the time in minutes.' }], tokenizer, 'opd', max).rows[0]!;
    const teacher = row.teacher!;
    expect(teacher.inputIds.length).toBeLessThanOrEqual(max);
    expect(teacher.inputIds.slice(teacher.responseStart)).toEqual(row.inputIds.slice(row.responseStart));
    expect(tokenizer.decode(teacher.inputIds, false)).toContain('Give the time in minutes.');
    expect(tokenizer.decode(teacher.inputIds, false)).toContain('Be brief.');
  });
});
