/**
 * What the on-policy tests share: the demo model, a database-style sample, a task file, and
 * two measurements of a policy (the base model, or an adapter fed as live LoRA inputs): the
 * log-prob of a word after a fixed prefix, and the success rate of K sampled replies.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { TrainingSample } from '../../src-shared/views.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { readAdapter } from '../../src-main/train/peft.js';
import type { LoraWeights } from '../../src-main/train/training-step.js';

export const MODEL = path.resolve(import.meta.dirname, '../../resources/models/stories260K');
export const STORY = [{ role: 'user' as const, content: 'Tell me a story.' }];

/** A database sample of session `sessionId` asking for a story, with `hint`. */
export function storySample(sessionId: string, hint: string | null, extra: Partial<TrainingSample> = {}): TrainingSample {
  return {
    sessionId, responseTurn: 1, messages: STORY.map((m) => ({ ...m })), response: { role: 'assistant', content: 'Once upon a time there was a cat.' },
    reward: 0, hint, repair: null, keptByAtLeastOne: false, ...extra,
  };
}

export function writeTasks(file: string, tasks: object[]): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');
  return file;
}

/** The demo model with an adapter's shape as LoRA inputs; `measure` runs with none (the base) and then with the adapter. */
export async function withAdapter<T>(adapterDir: string, measure: (engine: ModelEngine) => Promise<T>): Promise<{ base: T; adapted: T }> {
  const adapter = readAdapter(adapterDir, Checkpoint.open(MODEL).config);
  const engine = ModelEngine.open(MODEL, { threads: 1, lora: adapter.lora });
  try {
    const base = await measure(engine);
    engine.setLora(adapter.weights as LoraWeights);
    return { base, adapted: await measure(engine) };
  } finally {
    await engine.close();
  }
}

/** log p(word | the story prompt, then `prefix`), the word's tokens as the tokenizer writes them after the prefix. */
export async function wordLogprob(engine: ModelEngine, prefix: string, word: string): Promise<number> {
  const tok = engine.tokenizer;
  const prompt = tok.encodeChat(STORY);
  const before = tok.encode(prefix);
  const whole = tok.encode(prefix + word);
  if (!before.every((id, i) => whole[i] === id)) throw new Error(`'${word}' changes the tokens of '${prefix}'`);
  const [scored] = await engine.score([{ inputIds: [...prompt, ...whole], responseStart: prompt.length + before.length }]);
  return scored!.reduce((a, b) => a + b, 0);
}

/** The share of `n` sampled replies to the story prompt (fixed seeds) that `test` accepts. */
export async function successRate(engine: ModelEngine, test: (reply: string) => boolean, n = 64, maxNewTokens = 24): Promise<number> {
  const prompt = engine.tokenizer.encodeChat(STORY);
  const [replies] = await engine.generateBatch([{ promptIds: prompt, seeds: Array.from({ length: n }, (_, i) => 1000 + i), maxNewTokens }], { temperature: 1 });
  return replies!.filter((r) => test(engine.tokenizer.decode(r.tokens))).length / n;
}
