// The re-judge rules of the one judge runner (judge/runner.ts), in the cases where the
// workspace's former runner decided otherwise: a label made with hints is current, the
// prompt version a label records is the backend's own, and a label from an older prompt
// version is judged again. An in-process completer stands in for the LLM (no HTTP).
import { describe, expect, it } from 'vitest';
import { LlmJudge, type ChatCompleter } from '../../src-main/judge/llm-judge.js';
import { promptVersionFor } from '../../src-main/judge/prompts.js';
import { decide, runJudge, runPromptVersion } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import type { JudgeCandidate } from '../../src-shared/views.js';
import { sortingWorkspace } from './helpers.js';

/** An LLM judge whose completer counts its calls and always answers +1 (with a hint when asked). */
function countingJudge(model = 'judge-a') {
  const calls = { n: 0 };
  const completer: ChatCompleter = {
    backend: 'openai',
    model,
    async complete(messages) {
      calls.n++;
      const isHintPrompt = messages[1]!.content.includes('Does the next state reveal');
      return isHintPrompt ? '\\boxed{1} [HINT_START]Answer in the language the user asked for.[HINT_END]' : '\\boxed{1}';
    },
    async close() {},
  };
  return { judge: new LlmJudge(completer), calls };
}

function label(partial: Partial<JudgeCandidate['label']>): JudgeCandidate['label'] {
  return { source: null, judgeBackend: null, judgeModel: null, promptVersion: null, ...partial };
}

describe('judge runner: when a label is current', () => {
  it('an LLM judge records its own prompt version (reward prompt + hint prompt), not "+hints"', () => {
    const { judge } = countingJudge();
    expect(runPromptVersion(judge, true)).toBe(promptVersionFor(true));
    expect(runPromptVersion(judge, true)).toBe('reward-v1+hint-v2');
    expect(runPromptVersion(judge, false)).toBe('reward-v1');
    expect(runPromptVersion(new HeuristicJudge(), true)).toBe('heuristic-v2+hints');
  });

  it('decide: a +hints label is current for runs with and without hints; an older prompt version is judged again', () => {
    const { judge } = countingJudge();
    const mine = { source: 'judge:judge-a' as const, judgeBackend: 'openai', judgeModel: 'judge-a' };
    const withHints = label({ ...mine, promptVersion: 'reward-v1+hint-v2' });
    expect(decide(withHints, judge, 'reward-v1', false, false)).toBe('unchanged');
    expect(decide(withHints, judge, 'reward-v1+hint-v2', true, false)).toBe('unchanged');
    expect(decide(label({ ...mine, promptVersion: 'reward-v0' }), judge, 'reward-v1', false, false)).toBe('judge');
    expect(decide(label({ ...mine, promptVersion: 'reward-v0+hint-v2' }), judge, 'reward-v1+hint-v2', true, false)).toBe('judge');
    // A label without hints does not stand in for a run that asks for hints.
    expect(decide(label({ ...mine, promptVersion: 'reward-v1' }), judge, 'reward-v1+hint-v2', true, false)).toBe('judge');

    const heuristic = new HeuristicJudge();
    const heuristicWithHints = label({ source: 'heuristic', judgeBackend: 'heuristic', promptVersion: 'heuristic-v2+hints' });
    expect(decide(heuristicWithHints, heuristic, 'heuristic-v2', false, false)).toBe('unchanged');
    expect(decide(heuristicWithHints, heuristic, 'heuristic-v2+hints', true, false)).toBe('unchanged');
    expect(decide(heuristicWithHints, heuristic, 'heuristic-v2+hints', true, true)).toBe('judge');
  });

  it('labels judged with hints are not judged again, by a run with hints or without', async () => {
    const ws = await sortingWorkspace();
    const { judge, calls } = countingJudge();
    expect(await runJudge(ws, judge, { hints: true, votes: 1 })).toMatchObject({ judged: 3, promptVersion: 'reward-v1+hint-v2' });
    expect(calls.n).toBe(6); // a reward and a hint prompt per sample
    expect(ws.listSamples().map((s) => s.label.hint)).toEqual(Array(3).fill('Answer in the language the user asked for.'));

    expect(await runJudge(ws, judge, { hints: true, votes: 1 })).toMatchObject({ judged: 0, skippedUnchanged: 3 });
    expect(await runJudge(ws, judge, { hints: false, votes: 1 })).toMatchObject({ judged: 0, skippedUnchanged: 3 });
    expect(calls.n).toBe(6);
    // The hints stay: a run without hints did not overwrite them.
    expect(ws.listSamples().every((s) => s.label.hint !== null)).toBe(true);

    // The heuristic: its '+hints' labels are current for a run without hints too.
    const other = await sortingWorkspace();
    await runJudge(other, new HeuristicJudge(), { hints: true });
    expect(await runJudge(other, new HeuristicJudge(), { hints: false })).toMatchObject({ judged: 0, skippedUnchanged: 3 });
    ws.close();
    other.close();
  });

  it('a label from an older prompt version is judged again; the others are left alone', async () => {
    const ws = await sortingWorkspace();
    const { judge, calls } = countingJudge();
    await runJudge(ws, judge, { hints: false, votes: 1 });
    ws.storage.run("UPDATE labels SET prompt_version = 'reward-v0' WHERE response_turn = 4");
    const again = await runJudge(ws, judge, { hints: false, votes: 1 });
    expect(again).toMatchObject({ judged: 1, skippedUnchanged: 2 });
    expect(calls.n).toBe(4);
    const versions = ws.query<{ prompt_version: string }>('SELECT prompt_version FROM labels ORDER BY response_turn').map((r) => r.prompt_version);
    expect(versions).toEqual(['reward-v1', 'reward-v1', 'reward-v1']);
    ws.close();
  });
});
