// The local judge's votes go through one batched generation (docs/design.md §Batched
// generation): a sample's votes on one prompt share its prefill, the reward and hint prompts
// decode side by side, and each vote is the completion its own seed gives alone.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LocalCompleter } from '../../src-main/judge/local-completer.js';
import { LlmJudge, voteSeed } from '../../src-main/judge/llm-judge.js';
import type { JudgeInput } from '../../src-main/judge/verdicts.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { CUT_OFF_NOTE } from '../../src-main/judge/parse.js';
import { demoModelWithPositions } from './helpers.js';

const input = {
  sessionId: 's1',
  responseTurn: 1,
  response: 'The cat sat in the sun.',
  responseMessage: { role: 'assistant', content: 'The cat sat in the sun.' },
  nextState: { role: 'user', text: 'No, I asked about a dog.' },
} as unknown as JudgeInput;

let model: LocalModel;
beforeAll(async () => {
  // Room for the judge's prompts (the demo model's real 512 positions cannot hold them).
  model = await LocalModel.load(demoModelWithPositions(2048));
});
afterAll(() => model?.close());

describe('local judge votes', () => {
  it('3 votes with hints: one batch of 2 prompts × 3 seeds, each vote equal to its single run', async () => {
    const batch = vi.spyOn(model, 'generateBatch');
    const single = vi.spyOn(model, 'generate');
    try {
      const judge = new LlmJudge(LocalCompleter.wrap(model), { maxTokens: 24 });
      const verdict = await judge.judge(input, { votes: 3, hints: true });
      expect(batch).toHaveBeenCalledTimes(1);
      expect(single).not.toHaveBeenCalled();
      const prompts = batch.mock.calls[0]![0];
      expect(prompts).toHaveLength(2);
      expect(prompts[0]!.seeds).toEqual([0, 1, 2].map((i) => voteSeed('s1', 1, 'reward', i)));
      expect(prompts[1]!.seeds).toEqual([0, 1, 2].map((i) => voteSeed('s1', 1, 'hint', i)));
      single.mockRestore();
      for (let i = 0; i < 3; i++) {
        const alone = await model.generate(prompts[0]!.prompt, { temperature: 0.6, maxNewTokens: 24, seed: prompts[0]!.seeds[i]! });
        // A vote stopped by max_tokens ends with the note that says so.
        expect(verdict.votes[i]!.raw).toBe(alone.text + (alone.finishReason === 'length' ? CUT_OFF_NOTE : ''));
        const hint = await model.generate(prompts[1]!.prompt, { temperature: 0.6, maxNewTokens: 24, seed: prompts[1]!.seeds[i]! });
        expect(verdict.votes[i]!.hintRaw).toBe(hint.text + (hint.finishReason === 'length' ? CUT_OFF_NOTE : ''));
      }
    } finally {
      batch.mockRestore();
      single.mockRestore();
    }
  }, 60_000);

  it('a vote cancelled before its batch starts is dropped at once', async () => {
    const judge = LocalCompleter.wrap(model);
    const abort = new AbortController();
    const pending = judge.complete([{ role: 'user', content: 'hi' }], { temperature: 0.6, maxTokens: 4, seed: 1, signal: abort.signal });
    abort.abort();
    await expect(pending).rejects.toThrow();
  });
});
