// The local judge and the model's context (issue 11, item 13): a judge prompt too long for
// the model is cut from the left, with a note in the vote, and generation never runs past the
// model's positions. The demo model has 512; the reward prompt alone renders to about 630
// tokens on its tokenizer.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LocalCompleter } from '../../src-main/judge/local-completer.js';
import { parseRewardAnswer } from '../../src-main/judge/parse.js';
import { rewardPrompt } from '../../src-main/judge/prompts.js';
import type { JudgeInput } from '../../src-main/judge/verdicts.js';
import { LocalModel, type GenerateResult } from '../../src-main/model/local-model.js';
import { DEMO_MODEL } from './helpers.js';

const input = {
  sessionId: 's1',
  responseTurn: 1,
  response: 'Once upon a time there was a little cat who liked to play in the sun. '.repeat(30),
  responseMessage: { role: 'assistant', content: 'x' },
  nextState: { role: 'user', text: 'No, I asked for a dog story. Please write it again about a dog.' },
} as unknown as JudgeInput;

let model: LocalModel;
beforeAll(async () => {
  model = await LocalModel.load(DEMO_MODEL);
});
afterAll(() => model?.close());

describe('a judge prompt longer than the local model’s context', () => {
  it('is cut from the left: prompt and vote fit the 512 positions, and the vote says what was cut', async () => {
    const messages = rewardPrompt(input);
    const full = model.promptIds(messages.map((m) => ({ role: m.role, content: m.content })));
    expect(full.length).toBeGreaterThan(model.maxPositions);
    const generate = vi.spyOn(model, 'generateBatch');
    try {
      const judge = LocalCompleter.wrap(model);
      const raw = await judge.complete(messages, { temperature: 0.6, maxTokens: 512, seed: 1 });
      const out = ((await generate.mock.results[0]!.value) as GenerateResult[][])[0]![0]!;
      expect(out.promptTokens + out.tokens.length).toBeLessThanOrEqual(model.maxPositions);
      // The reply keeps a quarter of the context: 128 of 512.
      expect(out.promptTokens).toBe(model.maxPositions - 128);
      // What is kept is the end of the prompt (the reply, the next state and the question), after BOS.
      const kept = generate.mock.calls[0]![0][0]!.prompt as number[];
      expect(kept[0]).toBe(model.tokenizer.bosTokenId);
      expect(kept.slice(1)).toEqual(full.slice(full.length - (kept.length - 1)));
      const dropped = full.length - kept.length;
      expect(raw.split('\n')[0]).toBe(`[judge prompt cut: ${dropped} of its ${full.length} tokens were dropped from the start to fit the model's 512 positions]`);
      // The note never reads as an answer.
      expect(parseRewardAnswer(raw.split('\n')[0]!)).toBeUndefined();
    } finally {
      generate.mockRestore();
    }
  }, 60_000);

  it('a prompt that fits goes in whole, with no note', async () => {
    const judge = LocalCompleter.wrap(model);
    const short = [{ role: 'user' as const, content: 'Was it good? \\boxed{1}' }];
    const raw = await judge.complete(short, { temperature: 0.6, maxTokens: 8, seed: 1 });
    expect(raw.startsWith('[judge prompt cut')).toBe(false);
  });
});
