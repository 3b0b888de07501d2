// The tool loop inside on-policy training (docs/design.md §Rollouts, §On-policy training): a
// scripted policy (../rollout/scripted-policy.ts) drives the real loop on a tiny ChatML model,
// so a calculator <tool_call> runs and its answer is scored, a broken call and an unknown tool
// fail as tool turns until the error limit, and a model that keeps calling hits the turn
// limit; the training rows mask the tool turns, and old is the rollout's log-prob (the
// scripted policy's, far from the model's, so the drift shows it). Then one real run on the
// demo model, whose own output, a tool call or not, trains without error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Episode } from '../../src-shared/rollout.js';
import { trainOnPolicy } from '../../src-main/onpolicy/onpolicy-trainer.js';
import { readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { ScriptedPolicy, type Script } from '../rollout/scripted-policy.js';
import { conv, fakeExport, tempWorkspace } from '../store/helpers.js';
import { MODEL, writeTasks } from './helpers.js';

let tmp: string;
let tiny: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-onpolicy-tools-'));
  tiny = writeTinyModel(path.join(tmp, 'tiny'), { family: 'qwen2', seed: 3 }).dir;
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "17 * 23"}}</tool_call>';
const BROKEN = '<tool_call>{"name": "calculator", "arguments": {"expression": </tool_call>';
const UNKNOWN = '<tool_call>{"name": "shell", "arguments": {"cmd": "ls"}}</tool_call>';

/** calc: a call, then the answer; broken: bad JSON, then an unknown tool; loop: calls forever. */
const script: Script = (prompt) => {
  const toolTurns = prompt.split('<|im_start|>tool').length - 1;
  if (prompt.includes('Say something broken')) return toolTurns === 0 ? BROKEN : UNKNOWN;
  if (prompt.includes('Keep calling')) return CALL;
  return toolTurns === 0 ? CALL : 'It is 391.';
};

describe('the tool loop in on-policy training (scripted policy)', () => {
  let episodes: Episode[];
  let out: string;
  beforeAll(async () => {
    out = path.join(tmp, 'scripted');
    const tasks = writeTasks(path.join(tmp, 'tool-tasks.jsonl'), [
      { messages: [{ role: 'user', content: 'What is 17 times 23?' }], tools: ['calculator'], answer_regex: '\\b391\\b' },
      { messages: [{ role: 'user', content: 'Say something broken.' }], tools: ['calculator'], answer: 'ok' },
      { messages: [{ role: 'user', content: 'Keep calling.' }], tools: ['calculator'], answer: 'ok' },
    ]);
    const result = await trainOnPolicy({
      modelDir: tiny, outDir: out, method: 'rl', steps: 2, lr: 1e-3, loraR: 2, loraAlpha: 4, seed: 5,
      onPolicy: { taskFile: tasks, rollouts: 2, contextsPerStep: 3, maxTurns: 3, maxTokens: 400, toolErrorLimit: 2 },
    }, { policy: (engine) => new ScriptedPolicy(engine.tokenizer, script) });
    expect(result).toMatchObject({ status: 'finished', steps: 2, episodes: 12 });
    episodes = readEpisodes(path.join(out, 'episodes.jsonl')).episodes;
  });

  const of = (task: number) => episodes.filter((e) => e.contextId === `tool-tasks.jsonl:${task}`);

  it('runs the calculator and scores the answer after it', () => {
    expect(of(1)).toHaveLength(4);
    for (const e of of(1)) {
      expect(e).toMatchObject({ finish: 'answer', reward: 1, rewardSource: 'task' });
      expect(e.messages.slice(1).map((m) => m.role)).toEqual(['assistant', 'tool', 'assistant']);
      expect(e.messages[2]).toEqual({ role: 'tool', name: 'calculator', content: '391' });
      expect(e.summary).toMatchObject({ turns: 2, toolCalls: 1, invalidToolCalls: 0 });
    }
  });

  it('turns a broken call and an unknown tool into failing tool turns, up to the error limit', () => {
    for (const e of of(2)) {
      expect(e).toMatchObject({ finish: 'tool_errors', reward: -1 });
      expect(e.summary).toMatchObject({ turns: 2, toolCalls: 2, invalidToolCalls: 2 });
      const tools = e.messages.filter((m) => m.role === 'tool');
      expect(tools.every((m) => m.role === 'tool' && m.error)).toBe(true);
      expect(tools[1]!.content).toMatch(/unknown tool 'shell'/);
    }
  });

  it('stops a model that keeps calling at the turn limit, its last calls not run', () => {
    for (const e of of(3)) {
      expect(e).toMatchObject({ finish: 'max_turns', reward: -1 });
      expect(e.summary).toMatchObject({ turns: 3, toolCalls: 2 });
    }
  });

  it('trains on the generated tokens only, with the rollout log-probs as old', () => {
    const log = readLog(path.join(out, 'trainer_log.jsonl'));
    expect(log).toHaveLength(2);
    log.forEach((l, step) => {
      const mine = episodes.filter((e) => e.step === step);
      // Tool turns sit between the replies but are masked: only generated tokens count.
      expect(l.tokens).toBe(mine.reduce((n, e) => n + e.tokens.logprobs.length, 0));
      expect(mine.some((e) => e.tokens.generated.at(-1)!.end - e.tokens.promptLength > e.tokens.logprobs.length)).toBe(true);
      expect(l.episodes).toBe(6);
      // The scripted log-probs are not the model's: old came from the rollouts.
      expect(l.drift!).toBeGreaterThan(0.1);
    });
  });
});

describe('the tool loop with the demo model generating', () => {
  it('trains on whatever the model writes, a tool call or not', async () => {
    const out = path.join(tmp, 'real');
    const tasks = writeTasks(path.join(tmp, 'real-tasks.jsonl'), [
      { messages: [{ role: 'user', content: 'What is 2 + 2? Use the calculator.' }], tools: ['calculator'], answer: '4' },
      { messages: [{ role: 'user', content: 'Once upon a time' }], answer_regex: 'dog' },
    ]);
    const result = await trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'rl', steps: 2, lr: 1e-3, loraR: 4, loraAlpha: 8, seed: 2,
      onPolicy: { taskFile: tasks, rollouts: 4, contextsPerStep: 2, maxTurns: 2, maxTokens: 24 },
    });
    expect(result).toMatchObject({ status: 'finished', steps: 2, episodes: 16 });
    const { episodes: written, notes } = readEpisodes(path.join(out, 'episodes.jsonl'));
    expect(notes).toEqual([]);
    for (const e of written) {
      expect(['answer', 'max_tokens', 'max_turns', 'tool_errors']).toContain(e.finish);
      expect(e.rewardSource).toBe('task');
    }
    expect(readLog(path.join(out, 'trainer_log.jsonl')).every((l) => Number.isFinite(l.loss) && l.drift! < 1e-3)).toBe(true);
  });
});

describe('search_history in on-policy training', () => {
  it('never shows a held-out session to a rollout (its text would become the context of a trained reply)', async () => {
    const t = await tempWorkspace();
    await t.ws.importExport(fakeExport('history.jsonl', [
      conv('kept', [['user', 'Plan a trip to Lyon.'], ['assistant', 'Take the train to Lyon.']], { title: 'Kept trip' }),
      conv('held', [['user', 'Lyon or Geneva?'], ['assistant', 'Lyon, for the food.']], { title: 'Held trip' }),
    ]));
    const idOf = (title: string) => t.ws.listSessions().sessions.find((x) => x.title === title)!.id;
    const held = idOf('Held trip');
    t.ws.setHeldOut([held], true);
    t.ws.setHeldOut([idOf('Kept trip')], false);
    t.ws.close();
    const SEARCH = '<tool_call>{"name": "search_history", "arguments": {"query": "Lyon", "limit": 10}}</tool_call>';
    const tasks = writeTasks(path.join(tmp, 'search-tasks.jsonl'), [
      { messages: [{ role: 'user', content: 'Where did I plan to go?' }], tools: ['search_history'], answer: 'Lyon' },
    ]);
    const run = (outDir: string, hidden: { heldOut?: { sessionIds: string[]; samples: [] }; hiddenFromSearch?: string[] }) => trainOnPolicy({
      modelDir: tiny, outDir, method: 'rl', steps: 1, lr: 1e-3, loraR: 2, loraAlpha: 4, seed: 5, dbPath: t.dbPath, ...hidden,
      onPolicy: { taskFile: tasks, rollouts: 1, contextsPerStep: 1, maxTurns: 2, maxTokens: 400 },
    }, { policy: (engine) => new ScriptedPolicy(engine.tokenizer, (prompt) => (prompt.includes('<|im_start|>tool') ? 'Lyon' : SEARCH)) });
    try {
      // The app passes the split as heldOut; the CLI without --db passes it as hiddenFromSearch.
      const ways: [string, Parameters<typeof run>[1]][] = [['split', { heldOut: { sessionIds: [held], samples: [] } }], ['search', { hiddenFromSearch: [held] }]];
      for (const [name, hidden] of ways) {
        await run(path.join(tmp, `search-${name}`), hidden);
        const [episode] = readEpisodes(path.join(tmp, `search-${name}`, 'episodes.jsonl')).episodes;
        const found = episode!.messages.find((m) => m.role === 'tool')!.content;
        expect(found).toContain('Kept trip');
        expect(found).not.toContain('Held trip');
      }
    } finally {
      fs.rmSync(t.dir, { recursive: true, force: true });
    }
  });
});
