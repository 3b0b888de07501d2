// Serving with a LoRA adapter: the endpoint's tokens are what the model with that adapter
// generates with the same seed, its log-probs equal the trainer's own adapter-applied scorer
// on the same tokens, and differ from the base model's; and the merged model (W + s·B·A, as
// `train --merge` writes it) gives the same tokens.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { startOpenAiServer, type OpenAiServer } from '../../src-main/openai/server.js';
import { loadAdaptedModel } from '../../src-main/train/adapted-model.js';
import { initLora, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { scoreWithAdapter, writeMergedModel } from '../../src-main/train/merge.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { seededRandom } from '../../src-main/model/sampling.js';
import { DEMO_MODEL, tempDir } from '../judge/helpers.js';

const adapterDir = path.join(tempDir(), 'my-adapter');
const cacheRoot = tempDir();
let server: OpenAiServer;
let base: LocalModel;

beforeAll(async () => {
  const config = Checkpoint.open(DEMO_MODEL).config;
  const lora = { r: 4, alpha: 8, targets: ['q', 'v', 'down'] as ('q' | 'v' | 'down')[] };
  const specs = loraSpecs(config, lora.targets);
  const weights = initLora(specs, lora.r, 1);
  const rand = seededRandom(2);
  for (const s of specs) weights.get(loraBKey(s))!.forEach((_, i, b) => (b[i] = (rand() - 0.5) * 0.5)); // a trained-looking B ≠ 0
  writeAdapter(adapterDir, { lora, specs, weights, baseModel: DEMO_MODEL });
  [server, base] = await Promise.all([startOpenAiServer({ modelDir: DEMO_MODEL, adapterDir, token: 't', port: 0 }), LocalModel.load(DEMO_MODEL)]);
});
afterAll(async () => {
  await server?.close();
  await base?.close();
});

describe('the endpoint with an adapter', () => {
  it('names the adapter in the model id and answers with the adapter applied', async () => {
    const models = await (await fetch(`${server.baseUrl}/models`, { headers: { Authorization: 'Bearer t' } })).json();
    expect(models.data[0].id).toBe('stories260K+my-adapter');
    const messages = [{ role: 'user', content: 'Tell me a story.' }];
    const body = await (
      await fetch(`${server.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { Authorization: 'Bearer t', 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages, max_tokens: 10, seed: 1, logprobs: true }),
      })
    ).json();
    expect(body.model).toBe('stories260K+my-adapter');
    const promptIds = base.promptIds(messages);
    // The model with the adapter (generated here again with the same seed) gives the endpoint's
    // tokens, and so does the merged model; the trainer's LoRA scorer must give the endpoint's
    // log-probs on them.
    const served = body.choices[0].logprobs.content.map((c: { logprob: number }) => c.logprob) as number[];
    const adapted = await loadAdaptedModel(DEMO_MODEL, adapterDir);
    const direct = await adapted.generate(promptIds, { seed: 1, maxNewTokens: 10, temperature: 1 }).finally(() => adapted.close());
    const tokens = direct.tokens.filter((t) => !base.tokenizer.eosTokenIds.includes(t));
    expect(tokens).toHaveLength(served.length);
    const ckpt = Checkpoint.open(DEMO_MODEL);
    const adapter = readAdapter(adapterDir, ckpt.config);
    const merged = await LocalModel.load(writeMergedModel(ckpt, path.join(cacheRoot, 'merged'), adapter.lora, adapter.specs, adapter.weights));
    const fromMerged = await merged.generate(promptIds, { seed: 1, maxNewTokens: 10, temperature: 1 }).finally(() => merged.close());
    expect(fromMerged.tokens).toEqual(direct.tokens);
    const row = { inputIds: [...promptIds, ...tokens], responseStart: promptIds.length };
    const [withAdapter] = await scoreWithAdapter(DEMO_MODEL, adapterDir, [row]);
    served.forEach((lp, i) => expect(lp).toBeCloseTo(withAdapter![i]!, 4));
    const [baseScores] = await base.score([row]);
    expect(Math.max(...baseScores!.map((lp, i) => Math.abs(lp - withAdapter![i]!)))).toBeGreaterThan(1e-2);
  });

  it('refuses a folder that is not an adapter', async () => {
    const bad = await startOpenAiServer({ modelDir: DEMO_MODEL, adapterDir: tempDir(), token: 't', port: 0 });
    try {
      const res = await fetch(`${bad.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { Authorization: 'Bearer t', 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
      expect(res.status).toBe(503);
      expect((await res.json()).error.message).toMatch(/not a PEFT adapter folder \(missing adapter_config\.json\)/);
    } finally {
      await bad.close();
    }
  });
});
