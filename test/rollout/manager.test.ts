// The rollout manager end to end with a scripted generator (./scripted-policy.ts) and a real
// tokenizer and chat template (a tiny ChatML model): a calculator <tool_call> and then an
// answer; the token spans, the tool turns' template tokens, the log-probs kept exactly, the
// rewards, every finish reason, one batch per turn, deterministic seeds, resume, and the
// episode's training row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Episode } from '../../src-shared/rollout.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { runRollouts, type RolloutContext } from '../../src-main/rollout/manager.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { builtinTools } from '../../src-main/rollout/builtin-tools.js';
import { episodeRow } from '../../src-main/rollout/training-row.js';
import { checkEpisode } from '../../src-main/rollout/episodes-file.js';
import { ScriptedPolicy, type Script } from './scripted-policy.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-rollout-'));
let tok: ChatTokenizer;
const tools = new ToolRegistry(builtinTools(), { timeoutMs: 2000 });

beforeAll(() => {
  tok = ChatTokenizer.load(writeTinyModel(path.join(root, 'm'), { family: 'qwen2', seed: 3 }).dir);
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "17 * 23"}}</tool_call>';
/** A tool call first; once a tool turn is in the prompt, an answer. */
const callThenAnswer: Script = (prompt) => (prompt.includes('<|im_start|>tool') ? 'It is 391.' : CALL);

const context = (id: string, regex: string, extra: Partial<RolloutContext> = {}): RolloutContext => ({
  id, messages: [{ role: 'user', content: 'What is 17 times 23?' }],
  reward: { source: 'task', key: regex, score: (a) => (new RegExp(regex).test(a) ? 1 : -1) }, ...extra,
});

function expectConsistent(e: Episode): void {
  checkEpisode(JSON.parse(JSON.stringify(e)), e.id);
}

describe('the tool loop', () => {
  let policy: ScriptedPolicy;
  let episodes: Episode[];
  const emitted: string[] = [];
  beforeAll(async () => {
    policy = new ScriptedPolicy(tok, callThenAnswer);
    episodes = await runRollouts(policy, [context('a', '\\b391\\b'), context('b', '^392$')], {
      tools, rollouts: 2, maxTurns: 4, maxTokens: 200, seedBase: 100, step: 3, onEpisode: (e) => void emitted.push(e.id),
    });
  });

  it('generates every turn of every episode in one batch: first replies share their context prompt', () => {
    expect(policy.batches).toHaveLength(2);
    expect(policy.batches[0]!.map((p) => p.seeds)).toEqual([[100, 101], [102, 103]]);
    expect(policy.batches[0]!.every((p) => p.maxNewTokens === 200)).toBe(true);
    expect(policy.batches[1]!.map((p) => p.seeds.length)).toEqual([1, 1, 1, 1]);
    const firstReply = tok.encode(CALL).length + 1;
    expect(policy.batches[1]!.every((p) => p.maxNewTokens === 200 - firstReply)).toBe(true);
    expect(episodes.map((e) => e.id)).toEqual(['a#0@3', 'a#1@3', 'b#0@3', 'b#1@3']);
    expect(emitted).toEqual(episodes.map((e) => e.id));
    expect(episodes.map((e) => e.seed)).toEqual([100, 101, 102, 103]);
  });

  it('hands every turn the same carried cache rows, and clears them when the run ends', () => {
    expect(policy.carries.length).toBe(policy.batches.length);
    const [carry] = policy.carries;
    expect(carry).toBeDefined();
    expect(policy.carries.every((c) => c === carry)).toBe(true);
    expect(carry!.size).toBe(0);
  });

  it('records the call, its result as a tool turn, and the answer', () => {
    const e = episodes[0]!;
    expectConsistent(e);
    expect(e.finish).toBe('answer');
    expect(e.promptMessages).toBe(1);
    expect(e.messages).toEqual([
      { role: 'user', content: 'What is 17 times 23?' },
      { role: 'assistant', content: CALL, finish: 'eos', toolCalls: [{ name: 'calculator', arguments: { expression: '17 * 23' }, ok: true, result: '391', ms: expect.any(Number) }] },
      { role: 'tool', name: 'calculator', content: '391' },
      { role: 'assistant', content: 'It is 391.', finish: 'eos' },
    ]);
    expect(e.summary).toMatchObject({ turns: 2, toolCalls: 1, invalidToolCalls: 0, tokens: e.tokens.logprobs.length, reward: 1 });
  });

  it('keeps the generated tokens exactly, and the tool turn is the template between them', () => {
    const e = episodes[1]!;
    const { inputIds, promptLength, generated, logprobs } = e.tokens;
    const prompt = tok.encodeChat([{ role: 'user', content: 'What is 17 times 23?' }]);
    expect(inputIds.slice(0, promptLength)).toEqual(prompt);
    const end = tok.tokenToId('<|im_end|>')!;
    expect(generated).toHaveLength(2);
    expect(inputIds.slice(generated[0]!.start, generated[0]!.end)).toEqual([...tok.encode(CALL), end]);
    expect(inputIds.slice(generated[1]!.start, generated[1]!.end)).toEqual([...tok.encode('It is 391.'), end]);
    // The tool turn: the end of the assistant turn the model did not write, the tool message, the generation prompt.
    expect(inputIds.slice(generated[0]!.end, generated[1]!.start)).toEqual(tok.encode('\n<|im_start|>tool\n391<|im_end|>\n<|im_start|>assistant\n'));
    // The whole sequence is the conversation as the template renders it (less the template's last newline).
    const rendered = tok.applyChatTemplate(e.messages.map((m) => ({ role: m.role, content: m.content })), { addGenerationPrompt: false });
    expect(tok.decode(inputIds, false)).toBe(rendered.replace(/\n$/, ''));
    // Log-probs: the policy's, one per generated token, in order.
    const lengths = generated.map((s) => s.end - s.start);
    const seed2 = policy.batches[1]![1]!.seeds[0]!;
    expect(logprobs).toEqual([
      ...Array.from({ length: lengths[0]! }, (_, i) => ScriptedPolicy.logprob(101, i)),
      ...Array.from({ length: lengths[1]! }, (_, i) => ScriptedPolicy.logprob(seed2, i)),
    ]);
    expect(seed2).not.toBe(101);
  });

  it('scores the final answer on the last token of the final reply', () => {
    for (const e of episodes) {
      const last = e.tokens.generated.at(-1)!.end - 1;
      const want = e.contextId === 'a' ? 1 : -1;
      expect(e.rewards).toEqual([{ at: last, r: want }]);
      expect(e.reward).toBe(want);
      expect(e.rewardSource).toBe('task');
    }
  });

  it('turns into a training row: response from the first generated token, tool turns masked out', () => {
    const e = episodes[0]!;
    const row = episodeRow(e)!;
    const [g0, g1] = e.tokens.generated as [{ start: number; end: number }, { start: number; end: number }];
    expect(row.response_start).toBe(g0.start);
    expect(row.input_ids).toEqual(e.tokens.inputIds);
    const n = row.input_ids.length - row.response_start;
    expect(row.response_mask).toHaveLength(n);
    expect(row.old_logprobs).toHaveLength(n);
    const rel = (t: number) => t - row.response_start;
    for (let t = g0.start; t < row.input_ids.length; t++) {
      const generatedHere = (t >= g0.start && t < g0.end) || (t >= g1.start && t < g1.end);
      expect(row.response_mask[rel(t)]).toBe(generatedHere ? 1 : 0);
      if (!generatedHere) expect(row.old_logprobs[rel(t)]).toBe(0);
    }
    expect(row.old_logprobs.filter((_, i) => row.response_mask[i] === 1)).toEqual(e.tokens.logprobs);
    expect(row).toMatchObject({ rewards: e.rewards, reward: 1, group: 'a@3', episode_id: 'a#0@3' });
  });
});

describe('limits', () => {
  it('max_turns: a reply that still calls a tool after the last turn ends the episode, its calls not run', async () => {
    const policy = new ScriptedPolicy(tok, () => CALL);
    const [e] = await runRollouts(policy, [context('t', 'x')], { tools, rollouts: 1, maxTurns: 2, maxTokens: 500 });
    expectConsistent(e!);
    expect(e!.finish).toBe('max_turns');
    expect(e!.summary).toMatchObject({ turns: 2, toolCalls: 1 });
    expect(e!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(e!.tokens.generated.at(-1)!.end).toBe(e!.tokens.inputIds.length);
  });

  it('max_tokens: the budget spans all turns; the reply that reaches it is cut', async () => {
    const policy = new ScriptedPolicy(tok, callThenAnswer);
    const budget = tok.encode(CALL).length + 1 + 3;
    const [e] = await runRollouts(policy, [context('t', '391')], { tools, rollouts: 1, maxTurns: 4, maxTokens: budget });
    expectConsistent(e!);
    expect(e!.finish).toBe('max_tokens');
    expect(e!.summary.tokens).toBe(budget);
    expect(policy.batches[1]![0]!.maxNewTokens).toBe(3);
    expect(e!.messages.at(-1)).toMatchObject({ role: 'assistant', finish: 'length' });
  });

  it('max_tokens when the model runs out of positions, even before a first reply', async () => {
    const promptLength = tok.encodeChat(context('t', 'x').messages).length;
    const policy = new ScriptedPolicy(tok, () => 'a long story that goes on and on', promptLength + 4);
    const [e] = await runRollouts(policy, [context('t', 'x')], { tools, rollouts: 1 });
    expect(e!.finish).toBe('max_tokens');
    expect(policy.batches[0]![0]!.maxNewTokens).toBe(4);
    expect(e!.tokens.inputIds.length).toBe(promptLength + 4);
    const tiny = new ScriptedPolicy(tok, () => 'x', promptLength);
    const [none] = await runRollouts(tiny, [context('t', 'x')], { tools, rollouts: 1 });
    expect(none).toMatchObject({ finish: 'max_tokens', rewards: [], reward: null, rewardSource: 'none', summary: { turns: 0, tokens: 0 } });
    expect(tiny.batches).toHaveLength(0);
    expect(episodeRow(none!)).toBeNull();
  });

  it('tool_errors: invalid JSON and unknown tools become tool turns until the error limit', async () => {
    const bad = '<tool_call>{"name": "calculator", "arguments": </tool_call><tool_call>{"name": "shell", "arguments": {"cmd": "rm -rf /"}}</tool_call>';
    const policy = new ScriptedPolicy(tok, () => bad);
    const [e] = await runRollouts(policy, [context('t', 'x')], { tools, rollouts: 1, maxTurns: 5, toolErrorLimit: 3 });
    expectConsistent(e!);
    expect(e!.finish).toBe('tool_errors');
    expect(e!.summary).toMatchObject({ turns: 2, toolCalls: 4, invalidToolCalls: 4 });
    const toolTurns = e!.messages.filter((m) => m.role === 'tool');
    expect(toolTurns).toHaveLength(4);
    expect(toolTurns[0]).toEqual({ role: 'tool', name: 'shell', content: "error: unknown tool 'shell' (available: calculator, current_time)", error: true });
    expect(toolTurns[1]).toMatchObject({ role: 'tool', name: '', error: true, content: expect.stringMatching(/^error: invalid JSON in <tool_call>/) });
    // The first turn's errors went back to the model as tool turns; nothing follows the last reply.
    const text = tok.decode(e!.tokens.inputIds, false);
    expect(text).toContain('<|im_start|>tool\nerror: unknown tool');
    expect(text).toContain('<|im_start|>tool\nerror: invalid JSON in <tool_call>');
    expect(e!.tokens.generated.at(-1)!.end).toBe(e!.tokens.inputIds.length);
  });

  it('a tool the context does not offer is an unknown tool, and a tool error does not stop below the limit', async () => {
    const policy = new ScriptedPolicy(tok, callThenAnswer);
    const [e] = await runRollouts(policy, [context('t', '391', { tools: [] })], { tools, rollouts: 1, toolErrorLimit: 2 });
    expect(e!.finish).toBe('answer');
    expect(e!.messages[2]).toMatchObject({ role: 'tool', content: "error: unknown tool 'calculator' (available: none)", error: true });
    expect(e!.summary.invalidToolCalls).toBe(1);
  });
});

describe('resume and determinism', () => {
  it('skipped episodes are not generated; the others are exactly what a full run gives', async () => {
    const script: Script = (prompt, seed) => (prompt.includes('tool') ? `done ${seed % 5}` : seed % 2 ? CALL : `no tools ${seed}`);
    const contexts = [context('a', 'x'), context('b', 'x'), context('c', 'x')];
    const full = await runRollouts(new ScriptedPolicy(tok, script), contexts, { tools, rollouts: 3, seedBase: 7 });
    const skip = new Set(['a#0@0', 'a#1@0', 'a#2@0', 'b#1@0', 'c#0@0']);
    const policy = new ScriptedPolicy(tok, script);
    const rest = await runRollouts(policy, contexts, { tools, rollouts: 3, seedBase: 7, skip });
    expect(rest.map((e) => e.id)).toEqual(['b#0@0', 'b#2@0', 'c#1@0', 'c#2@0']);
    const strip = (e: Episode) => ({ ...e, messages: JSON.parse(JSON.stringify(e.messages).replace(/"ms":\d+/g, '"ms":0')), summary: { ...e.summary, seconds: 0 } });
    for (const e of rest) expect(strip(e)).toEqual(strip(full.find((f) => f.id === e.id)!));
    // Context a is wholly done: its prompt is not even rendered into the batch.
    expect(policy.batches[0]!.map((p) => p.seeds)).toEqual([[10, 12], [14, 15]]);
  });

  it('refuses settings that make no sense', async () => {
    const policy = new ScriptedPolicy(tok, () => 'x');
    await expect(runRollouts(policy, [context('a', 'x')], { tools, rollouts: 0 })).rejects.toThrow(/rollouts must be a whole number ≥ 1/);
    await expect(runRollouts(policy, [context('a', 'x')], { tools, maxTurns: 1.5 })).rejects.toThrow(/maxTurns must be/);
  });
});
