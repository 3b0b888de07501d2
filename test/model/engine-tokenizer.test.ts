// The model worker's engine loads the tokenizer only when it needs one (docs/design.md
// §Memory, One tokenizer per model): LocalModel holds it in its own thread and hands over the
// end-of-sequence ids, the drift text's ids, and decodes the generated text itself.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-engine-tokenizer-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** A tiny model, its tokenizer loaded, then its tokenizer.json removed: any later load fails. */
function modelWithoutTokenizerFile(name: string): { dir: string; tokenizer: ChatTokenizer } {
  const dir = writeTinyModel(path.join(root, name), { family: 'qwen3', seed: 4 }).dir;
  const tokenizer = ChatTokenizer.load(dir);
  fs.rmSync(path.join(dir, 'tokenizer.json'));
  return { dir, tokenizer };
}

describe('the engine and the tokenizer', () => {
  it('given the EOS ids, generates and scores without loading a tokenizer; decoding text loads it', async () => {
    const { dir, tokenizer } = modelWithoutTokenizerFile('lazy');
    const engine = ModelEngine.open(dir, { threads: 1, eosTokenIds: tokenizer.eosTokenIds, graphCache: false });
    try {
      const out = await engine.generate([1, 2, 3], { maxNewTokens: 4, decodeText: false, stopTokenIds: [] });
      expect(out.tokens).toHaveLength(4);
      expect(out.text).toBe('');
      expect(await engine.score([{ inputIds: [1, 2, 3, 4], responseStart: 2 }])).toHaveLength(1);
      await expect(engine.generate([1, 2, 3], { maxNewTokens: 2 })).rejects.toThrow(/tokenizer/i);
    } finally {
      await engine.close();
    }
  });

  it('without them, a missing tokenizer fails the open', () => {
    const { dir } = modelWithoutTokenizerFile('eager');
    expect(() => ModelEngine.open(dir, { threads: 1, graphCache: false })).toThrow(/tokenizer/i);
  });

  it("LocalModel's text is its own thread's decoding of the tokens", async () => {
    const dir = writeTinyModel(path.join(root, 'local'), { family: 'qwen3', seed: 4 }).dir;
    const model = await LocalModel.load(dir, { threads: 1, graphCache: false });
    try {
      const out = await model.generate('hello', { maxNewTokens: 6, temperature: 0.9, seed: 3, stopTokenIds: [] });
      expect(out.tokens).toHaveLength(6);
      expect(out.text).toBe(model.tokenizer.decode(out.tokens));
    } finally {
      await model.close();
    }
  });
});
