// Replay (docs/design.md §Evaluation): win/tie/loss counting on fixed numbers; replay end to
// end on the demo model against a scripted OpenAI-compatible judge (through `hindsight eval`,
// so the worker and the flags are in the path), and once with the local judge backend for the
// mechanics. The scripted judge answers from the new reply's text alone, so the expected labels
// can be recomputed from the report.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contextScores, describeReplay, winTieLoss, type ReplayMetrics, type WinTieLoss } from '../../src-shared/eval-replay.js';
import type { EvalReport } from '../../src-shared/eval-report.js';
import { evaluate } from '../../src-main/eval/evaluate.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { withWorkspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { scriptedServer, type ScriptedServer } from '../judge/helpers.js';
import { conv, fakeExport, tempDir, tempWorkspace } from '../store/helpers.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { writeRealTinyModel } from '../../tools/real-tokenizers.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { withEnv } from '../helpers/env.js';

const MODEL = path.resolve('resources/models/stories260K');

describe('win/tie/loss', () => {
  it('counts per context over the contexts both models replayed, with the net win rate', () => {
    const a = new Map([['s/1', 1], ['s/3', 0.5], ['s/5', -1], ['s/7', 0], ['s/9', 1]]);
    const b = new Map([['s/1', 0], ['s/3', 0.5], ['s/5', 0], ['s/7', -0.5], ['other', 1]]);
    const w = winTieLoss(a, b, 7);
    expect(w).toMatchObject({ win: 2, tie: 1, loss: 1, n: 4, mean: 0.25 });
    expect(w.ci![0]).toBeLessThanOrEqual(0.25);
    expect(w.ci![1]).toBeGreaterThanOrEqual(0.25);
    expect(winTieLoss(a, b, 7)).toEqual(w); // seeded
    expect(winTieLoss(new Map([['k', 1]]), new Map([['k', 1]]), 0)).toEqual({ win: 0, tie: 1, loss: 0, n: 1, mean: 0, ci: [0, 0] });
    expect(winTieLoss(new Map(), new Map(), 0)).toEqual({ win: 0, tie: 0, loss: 0, n: 0, mean: null, ci: null });
  });

  it("scores a context by its replies' mean reward, and says the comparison in words", () => {
    const reply = (reward: 1 | 0 | -1) => ({ seed: 0, text: '', reward, votes: [] });
    expect(contextScores({ replies: { x: [reply(1), reply(-1), reply(1), reply(1)], y: [] } })).toEqual(new Map([['x', 0.5]]));
    const sure: WinTieLoss = { win: 12, tie: 5, loss: 3, n: 20, mean: 0.45, ci: [0.06, 0.69] };
    expect(describeReplay({ a: 'runs/a', b: 'base', replay: sure })).toBe('runs/a beats base on replay: 12 wins, 5 ties, 3 losses of 20 contexts (net +0.45, 95% CI [0.06, 0.69])');
    // Below the minimum (MIN_HELD_OUT_SAMPLES) the counts, and no verdict or interval (issue 34).
    expect(describeReplay({ a: 'runs/a', b: 'base', replay: { win: 9, tie: 4, loss: 3, n: 16, mean: 0.375, ci: [0.06, 0.69] } }))
      .toBe('runs/a vs base on replay: 9 wins, 4 ties, 3 losses of 16 contexts; too few held-out samples to tell (n = 16)');
    expect(describeReplay({ a: 'runs/a', b: 'base', replay: { ...sure, ci: [-0.1, 0.5] } })).toMatch(/cannot be told apart from base/);
  });
});

/** The scripted judge's rule: +1 when the new reply has an even number of characters, −1 otherwise. */
function scriptedVote(body: { messages: { content: string }[] }): string {
  const text = body.messages.at(-1)!.content;
  const reply = text.slice(text.indexOf('## New reply\n') + 13, text.lastIndexOf('\n\nWould the new reply'));
  return `Thinking it over. \\boxed{${reply.length % 2 === 0 ? 1 : -1}}`;
}

describe('replay on the demo model', () => {
  let dir: string;
  let dbPath: string;
  let adapter: string;
  let server: ScriptedServer;

  beforeAll(async () => {
    dir = tempDir('hindsight-replay-');
    const opened = await tempWorkspace();
    dbPath = opened.dbPath;
    const conversations = Array.from({ length: 6 }, (_, k) =>
      conv(`story${k}`, [['user', `Tell me a story about ${['a cat', 'a dog', 'the sun'][k % 3]}.`], ['assistant', 'Once upon a time there was a cat.'], ['user', k % 2 ? 'Lovely, thanks!' : 'No, make it longer.']]));
    await opened.ws.importExport(fakeExport('stories.jsonl', conversations));
    opened.ws.setHeldOut(['openai:story0', 'openai:story1', 'openai:story2'], true);
    await opened.ws.close();
    // An adapter with B ≠ 0, so its replies differ from the base's.
    const ckpt = Checkpoint.open(MODEL);
    const lora = { r: 4, alpha: 32, targets: ['q' as const, 'v' as const, 'down' as const] };
    const specs = loraSpecs(ckpt.config, lora.targets);
    const weights = initLora(specs, lora.r, 5);
    for (const spec of specs) weights.set(loraBKey(spec), Float32Array.from({ length: spec.outFeatures * lora.r }, (_, i) => ((i % 7) - 3) * 0.05));
    adapter = path.join(dir, 'noisy');
    writeAdapter(adapter, { lora, specs, weights, baseModel: MODEL });
    server = await scriptedServer((body) => ({ content: scriptedVote(body) }));
  });
  afterAll(() => server?.close());

  it('generates K replies per model with the same seeds, judges each with m votes, and counts win/tie/loss', async () => {
    const r = await runCli('eval', '--model', MODEL, '--db', dbPath, '--adapter', adapter, '--rollouts', '2', '--votes', '3', '--max-new-tokens', '12',
      '--judge-backend', 'openai', '--judge-url', server.baseUrl, '--judge-model', 'scripted', '--json');
    expect(r.stderr).toMatch(/judged 3\/3 replayed contexts/);
    expect(r.code).toBe(0);
    const report: EvalReport = r.json();
    expect(report.metrics).toEqual(['likelihood', 'hints', 'replay', 'stats']);
    expect(server.requests).toHaveLength(2 * 3 * 2 * 3); // models × contexts × K × m
    const [base, noisy] = report.models.map((m) => m.replay as ReplayMetrics);
    expect(base!).toMatchObject({ judge: 'openai:scripted', prompt_version: 'replay-v1', rollouts: 2, votes: 3, reward: { n: 3 } });
    for (const m of [base!, noisy!]) {
      for (const replies of Object.values(m.replies)) {
        expect(replies).toHaveLength(2);
        for (const reply of replies) {
          expect(reply.votes).toHaveLength(3);
          expect(reply.votes.every((v) => v.prompt === 'replay-v1')).toBe(true);
          expect(reply.reward).toBe((reply.text.trim() || '(empty reply)').length % 2 === 0 ? 1 : -1);
        }
      }
    }
    const key = Object.keys(base!.replies)[0]!;
    expect(noisy!.replies[key]!.map((x) => x.seed)).toEqual(base!.replies[key]!.map((x) => x.seed));
    expect(report.comparisons[0]!.replay).toEqual(winTieLoss(contextScores(noisy!), contextScores(base!), 0));
    expect(report.models[0]!.stats).toMatchObject({ replies: 6, reply_tokens: { n: 6 } });
    expect(report.replay_contexts).toHaveLength(3);
    expect(report.replay_contexts![0]!.reaction?.text).toMatch(/longer|thanks/);
  }, 120_000);

  it('skips replay with a message without an LLM judge, and runs with the local backend', async () => {
    const none = await runCli('eval', '--model', MODEL, '--db', dbPath, '--metrics', 'replay', '--json');
    expect(none.json().models[0].replay.skipped).toMatch(/heuristic cannot judge a replay/);
    const samples = await withWorkspace(dbPath, (ws) => ws.evaluationSamples('heldout'), { access: 'read' });
    const report = await evaluate({
      modelDir: MODEL, adapters: [], samples: samples.slice(0, 1), split: { name: 'heldout', sessions: 1, samples: 1 }, metrics: ['replay'], seed: 0, device: 'cpu',
      replay: { rollouts: 2, votes: 2, maxNewTokens: 8, judge: { backend: 'local', modelDir: MODEL, maxTokens: 8 } },
    });
    const replay = report.models[0]!.replay as ReplayMetrics;
    const replies = Object.values(replay.replies)[0]!;
    expect(replies).toHaveLength(2);
    expect(replies.flatMap((x) => x.votes)).toHaveLength(4);
    expect(replay.judge).toBe(`local:${MODEL}`);
  }, 120_000);
});

describe('replay where fp32 does not fit', () => {
  it('generates under every model in the one form of the weights that fits, and says so first', async () => {
    const opened = await tempWorkspace();
    await opened.ws.importExport(fakeExport('stories.jsonl', [conv('story', [['user', 'Tell me a story.'], ['assistant', 'Once upon a time.'], ['user', 'Lovely!']])]));
    opened.ws.setHeldOut(['openai:story'], true);
    const samples = opened.ws.evaluationSamples('heldout');
    await opened.ws.close();
    const ckpt = Checkpoint.open(MODEL);
    const lora = { r: 2, alpha: 4, targets: ['q' as const] };
    const specs = loraSpecs(ckpt.config, lora.targets);
    const adapter = path.join(tempDir('hindsight-replay-form-'), 'tiny');
    writeAdapter(adapter, { lora, specs, weights: initLora(specs, lora.r, 1), baseModel: MODEL });
    const need = (quantize: 'none' | 'int8') => estimateInferenceMemory(modelShape(MODEL), { quantize }).total;
    const messages: string[] = [];
    const report = await withEnv('HINDSIGHT_MEMORY_BUDGET', String(Math.floor((need('none') + need('int8')) / 2)), () => evaluate({
      modelDir: MODEL, adapters: [adapter], samples, split: { name: 'heldout', sessions: 1, samples: 1 }, metrics: ['replay'], seed: 0, device: 'cpu',
      replay: { rollouts: 1, votes: 1, maxNewTokens: 4, judge: { backend: 'local', modelDir: MODEL, maxTokens: 4 } },
    }, { onProgress: (p) => messages.push(p.message) }));
    expect(messages[0]).toMatch(/^replay: int8 weights: fp32 would need about .* \(HINDSIGHT_MEMORY_BUDGET\)$/);
    expect(report.notes).toContain(`replay generated with ${messages[0]!.slice('replay: '.length)}`);
    expect(report.models.map((m) => Object.keys((m.replay as ReplayMetrics).replies))).toEqual([['openai:story/1'], ['openai:story/1']]);
  }, 120_000);
});

describe('replay of an agent\'s context (a reply that called a tool)', () => {
  const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const CALL = { id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' };
  let dir: string;
  let server: ScriptedServer;
  afterAll(() => server?.close());

  it('generates with the session\'s tools offered, and the judge reads the calls of the context, the original and the new replies', async () => {
    dir = tempDir('hindsight-replay-tools-');
    const model = writeRealTinyModel(path.join(dir, 'model'), 'qwen3', { family: 'qwen3' });
    const opened = await tempWorkspace();
    await opened.ws.importExport(fakeExport('agent.jsonl', [conv('agent', [
      ['user', 'Weather in Paris?'],
      { role: 'assistant', text: '', toolCalls: [CALL] },
      { role: 'tool', text: '18°C', toolCallId: 'call_1', toolName: 'get_weather' },
      ['assistant', 'It is 18°C.'],
      ['user', 'Thanks!'],
    ], { metadata: { tools: TOOLS } })]));
    opened.ws.setHeldOut(['openai:agent'], true);
    const samples = opened.ws.evaluationSamples('heldout');
    await opened.ws.close();
    server = await scriptedServer(() => ({ content: '\\boxed{1}' }));
    const report = await evaluate({
      modelDir: model.dir, adapters: [], samples, split: { name: 'heldout', sessions: 1, samples: samples.length }, metrics: ['replay'], seed: 0, device: 'cpu',
      replay: { rollouts: 1, votes: 1, maxNewTokens: 4, judge: { backend: 'openai', baseUrl: server.baseUrl, model: 'scripted' } },
    });
    const prompts = server.requests.map((r) => (r.body as { messages: { content: string }[] }).messages.at(-1)!.content);
    expect(prompts).toHaveLength(2);
    // The tool-call reply: its call is the original; the answer after the tool: the call is in the conversation.
    expect(prompts.some((p) => /## Original reply\n\[tool call\] get_weather\(\{"city":"Paris"\}\)/.test(p))).toBe(true);
    expect(prompts.some((p) => /## Conversation so far\n[^#]*\[assistant\] \[tool call\] get_weather/.test(p))).toBe(true);
    // The report's contexts keep the calls (not the tools, which the replay used).
    const contexts = report.replay_contexts!;
    expect(contexts.map((c) => c.original)).toEqual(['[tool call] get_weather({"city":"Paris"})', 'It is 18°C.']);
    expect(contexts[1]!.context[1]!.tool_calls![0]!.function.name).toBe('get_weather');
    expect(contexts.every((c) => !('tools' in c))).toBe(true);
  }, 120_000);

  it('a batch prompt\'s own tools are its template\'s: its prompt ids are the chat rendered with them', async () => {
    const model = await LocalModel.load(path.join(dir, 'model'));
    try {
      const messages = [{ role: 'user', content: 'Weather in Paris?' }];
      const [[withTools], [without]] = await model.generateBatch([{ prompt: messages, seeds: [1], template: { tools: TOOLS } }, { prompt: messages, seeds: [1] }], { maxNewTokens: 2 });
      expect(withTools!.promptTokens).toBe(model.tokenizer.encodeChat(messages, { addGenerationPrompt: true, tools: TOOLS }).length);
      expect(without!.promptTokens).toBe(model.tokenizer.encodeChat(messages, { addGenerationPrompt: true }).length);
      expect(withTools!.promptTokens).toBeGreaterThan(without!.promptTokens);
    } finally {
      await model.close();
    }
  });
});
