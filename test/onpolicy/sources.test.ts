// Where an on-policy run's contexts and rewards come from besides a task file
// (docs/design.md §On-policy training): database samples scored by the replay judge (a real
// OpenAI-compatible server on 127.0.0.1 whose answers the test picks), a sample captured live
// from the model being trained (its reply trains with the user's label beside the new
// rollouts), and the refusals: a held-out session, or samples that give the method nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { trainOnPolicy } from '../../src-main/onpolicy/onpolicy-trainer.js';
import { readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { findCheckpoint } from '../../src-main/train/run-checkpoint.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { scriptedServer, type ScriptedServer } from '../judge/helpers.js';
import { MODEL, STORY, storySample } from './helpers.js';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-onpolicy-sources-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('database samples scored by the replay judge', () => {
  let server: ScriptedServer;
  beforeAll(async () => {
    // +1 when the new reply mentions Lily, as the user asked; −1 otherwise.
    server = await scriptedServer((body) => ({ content: /Lily/.test(String(body.messages[1].content).split('## New reply')[1]) ? '\\boxed{1}' : '\\boxed{-1}' }));
  });
  afterAll(() => server.close());

  it('labels every rollout with m votes, knowing the user\'s reaction, and keeps the API key off the disk', async () => {
    const out = path.join(tmp, 'judged');
    const sample = storySample('s1', null, { reward: -1, reaction: { role: 'user', text: 'I wanted a story about Lily!' } });
    const result = await trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'rl', steps: 2, lr: 1e-3, loraR: 4, loraAlpha: 8, seed: 3, samples: [sample],
      onPolicy: { rollouts: 4, contextsPerStep: 1, maxTokens: 24, votes: 3, judge: { backend: 'openai', baseUrl: server.baseUrl, model: 'judge', apiKey: 'k3y-secret' } },
    });
    expect(result).toMatchObject({ status: 'finished', episodes: 8 });
    const { episodes } = readEpisodes(path.join(out, 'episodes.jsonl'));
    for (const e of episodes) {
      expect(e.rewardSource).toBe('replay');
      expect(e.reward).toBe(/Lily/.test(e.messages.at(-1)!.content) ? 1 : -1);
      expect(e.rewards).toEqual([{ at: e.tokens.generated.at(-1)!.end - 1, r: e.reward }]);
    }
    expect(server.requests).toHaveLength(8 * 3);
    const asked = String(server.requests[0]!.body.messages[1].content);
    expect(asked).toContain('I wanted a story about Lily!');
    expect(asked).toContain('Once upon a time there was a cat.');
    expect(server.requests[0]!.headers.authorization).toBe('Bearer k3y-secret');
    expect(new Set(server.requests.slice(0, 3).map((r) => r.body.seed)).size).toBe(3);
    const log = readLog(path.join(out, 'trainer_log.jsonl'));
    expect(log.map((l) => l.episode_reward_mean)).toEqual([0, 1].map((s) => episodes.filter((e) => e.step === s).reduce((a, e) => a + e.reward!, 0) / 4));
    const state = fs.readFileSync(path.join(findCheckpoint(out), 'trainer_state.json'), 'utf8');
    expect(state).toContain(server.baseUrl);
    expect(state).not.toContain('k3y-secret');
  });
});

describe('a sample captured live from the model being trained', () => {
  it('trains its captured reply with the user\'s label beside the new rollouts, which learn from the hint', async () => {
    const engine = ModelEngine.open(MODEL, { threads: 1 });
    const promptIds = engine.tokenizer.encodeChat(STORY);
    const captured = await engine.generate(promptIds, { maxNewTokens: 12, temperature: 1, seed: 9 });
    const reply = engine.tokenizer.decode(captured.tokens);
    await engine.close();
    const sample = storySample('cap', 'The story is about a dog named Tim.', {
      reward: 1, response: { role: 'assistant', content: reply }, rollout: { promptIds, tokens: captured.tokens, logprobs: captured.logprobs },
    });
    const out = path.join(tmp, 'captured');
    await trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'combine', steps: 2, lr: 1e-3, loraR: 4, loraAlpha: 8, seed: 4, samples: [sample],
      onPolicy: { rollouts: 3, contextsPerStep: 1, maxTokens: 16 },
    });
    const { episodes } = readEpisodes(path.join(out, 'episodes.jsonl'));
    expect(episodes.map((e) => e.id)).toEqual(['cap/1#3@0', 'cap/1#0@0', 'cap/1#1@0', 'cap/1#2@0', 'cap/1#3@1', 'cap/1#0@1', 'cap/1#1@1', 'cap/1#2@1']);
    const label = episodes[0]!;
    expect(label).toMatchObject({ rewardSource: 'label', reward: 1, sample: 3 });
    expect(label.tokens.inputIds).toEqual([...promptIds, ...captured.tokens]);
    expect(label.tokens.logprobs).toEqual(captured.logprobs);
    expect(label.teacherGap).toHaveLength(captured.tokens.length);
    for (const e of episodes.filter((x) => x.sample < 3)) expect(e).toMatchObject({ rewardSource: 'opd', reward: null });
    const log = readLog(path.join(out, 'trainer_log.jsonl'));
    // Every episode trains, on its generated tokens; the captured one was generated by the base, which the first step still is.
    log.forEach((l, step) => expect(l.tokens).toBe(episodes.filter((e) => e.step === step).reduce((n, e) => n + e.tokens.logprobs.length, 0)));
    expect(log[0]!.drift!).toBeLessThan(1e-3);
    expect(log.map((l) => l.episode_reward_mean)).toEqual([1, 1]);
  });
});

describe('refusals', () => {
  it('refuses a context from a held-out session before touching the folder', async () => {
    const out = path.join(tmp, 'held');
    await expect(trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'opd', steps: 1, samples: [storySample('kept-out', 'A dog named Tim.')],
      heldOut: { sessionIds: ['kept-out'], samples: [] }, onPolicy: {},
    })).rejects.toThrow(/refusing to train on kept-out\/1: session kept-out is held out for evaluation/);
    expect(fs.existsSync(out)).toBe(false);
  });

  it('refuses samples that give the method nothing, naming what they lack', async () => {
    await expect(trainOnPolicy({ modelDir: MODEL, outDir: path.join(tmp, 'nohint'), method: 'opd', samples: [storySample('s', null)], onPolicy: {} }))
      .rejects.toThrow(/nothing to train on-policy with method opd: the database gives no context \(left out: 1 × no hint\)/);
  });
});
