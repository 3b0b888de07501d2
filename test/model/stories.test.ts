// The real pretrained model (stories260K, a Llama): greedy decoding must reproduce the
// llama2.c reference ids exactly, through the KV cache and without it, with --quantize none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { LocalModel } from '../../src-main/model/local-model.js';

const DIR = path.resolve('resources/models/stories260K');
const reference = JSON.parse(fs.readFileSync(path.join(DIR, 'reference_greedy.json'), 'utf8')) as {
  prompt_ids: number[];
  bos_greedy_200_ids: number[];
  bos_greedy_200_text: string;
  prompt_greedy_16_ids: number[];
};

describe('stories260K (real Llama checkpoint)', () => {
  let model: LocalModel;
  beforeAll(async () => {
    // --quantize none, named: the golden output holds for the unquantised path (docs/design.md §Quantisation).
    model = await LocalModel.load(DIR, { device: 'cpu', prepare: ['generate'], quantize: 'none' });
  });
  afterAll(() => model?.close());

  it('reports the EP it runs on and uses the documented fallback template', () => {
    expect(model.executionProvider).toBe('cpu');
    expect(model.tokenizer.chatTemplateSource).toBe('fallback');
    expect(model.tokenizer.applyChatTemplate([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true })).toBe('<s>User: Hi\n\nAssistant:');
  });

  it('encodes the prompt as llama2.c does', () => {
    expect(model.promptIds('Once upon a time', { chatTemplate: false })).toEqual(reference.prompt_ids);
  });

  for (const useKvCache of [true, false]) {
    it(`greedy from BOS reproduces the 200 reference tokens ${useKvCache ? 'with' : 'without'} the KV cache`, async () => {
      const bos = reference.bos_greedy_200_ids[0]!;
      const n = reference.bos_greedy_200_ids.length - 1;
      const out = await model.generate([bos], { maxNewTokens: n, useKvCache, stopTokenIds: [] });
      expect([bos, ...out.tokens]).toEqual(reference.bos_greedy_200_ids);
      expect(out.text).toBe(reference.bos_greedy_200_text);
      expect(out.text.startsWith('Once upon a time, there was a little girl named Lily.')).toBe(true);
      expect(out.finishReason).toBe('length');
      // Greedy picks the mode, so each log-prob is the largest of its step: negative, not tiny.
      expect(out.logprobs.every((lp) => lp <= 0 && lp > -10)).toBe(true);
    });
  }

  it('continues the prompt as the reference does', async () => {
    const p = reference.prompt_ids;
    const n = reference.prompt_greedy_16_ids.length - p.length;
    const out = await model.generate(p, { maxNewTokens: n, stopTokenIds: [] });
    expect([...p, ...out.tokens]).toEqual(reference.prompt_greedy_16_ids);
  });

  it('scores its own greedy continuation with the log-probs generation reported', async () => {
    const ids = reference.bos_greedy_200_ids.slice(0, 60);
    const gen = await model.generate(ids.slice(0, 10), { maxNewTokens: 50, stopTokenIds: [] });
    const [lp] = await model.score([{ inputIds: ids, responseStart: 10 }]);
    expect(lp).toHaveLength(50);
    lp!.forEach((v, i) => expect(v).toBeCloseTo(gen.logprobs[i]!, 4));
  });
});
