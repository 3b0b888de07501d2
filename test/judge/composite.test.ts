// The composite reward judge (docs/design.md §Composite score): reading one answer (malformed
// ones are no vote), counting votes over a scripted OpenAI-compatible server (median score,
// thresholds, confidence, reasons), storing score and reasons with the label, carrying them in
// the samples and openclaw exports, the review queue, and the CLI flags.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rewardFromScore, thresholdProblem } from '../../src-shared/composite.js';
import { compositeFromVotes, compositeVote, parseCompositeAnswer } from '../../src-main/judge/composite-votes.js';
import { LlmJudge } from '../../src-main/judge/llm-judge.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { runCli } from '../helpers/cli.js';
import { scriptedServer, sortingWorkspace, tempDir, type ScriptedServer } from './helpers.js';

const WELL_FORMED = `<think>The user corrected the language. \\boxed{90}</think>
correctness: 40 | It sorts, but in JavaScript.
instruction: 10 | The user asked for Python.
tone: 80 | Plain and polite.
length: 70 | Short enough.
\\boxed{22}`;

describe('parseCompositeAnswer', () => {
  it('reads the last boxed score after the reasoning, and each dimension line', () => {
    const a = parseCompositeAnswer(WELL_FORMED);
    expect(a.score).toBe(22);
    expect(a.dimensions).toEqual([
      { name: 'correctness', score: 40, reason: 'It sorts, but in JavaScript.' },
      { name: 'instruction', score: 10, reason: 'The user asked for Python.' },
      { name: 'tone', score: 80, reason: 'Plain and polite.' },
      { name: 'length', score: 70, reason: 'Short enough.' },
    ]);
  });

  it('accepts common spellings of a score and of a dimension line', () => {
    expect(parseCompositeAnswer('\\boxed{72/100}').score).toBe(72);
    expect(parseCompositeAnswer('\\boxed{ 72.5 }').score).toBe(72.5);
    expect(parseCompositeAnswer('\\boxed{$85\\%$}').score).toBe(85);
    expect(parseCompositeAnswer('\\boxed{\\text{100}}').score).toBe(100);
    expect(parseCompositeAnswer('\\boxed{0}').score).toBe(0);
    const loose = parseCompositeAnswer('- **Correctness**: 90/100 — right answer\n* Tone = 60 - a bit curt\n\\boxed{80}');
    expect(loose.dimensions).toEqual([
      { name: 'correctness', score: 90, reason: 'right answer' },
      { name: 'tone', score: 60, reason: 'a bit curt' },
    ]);
  });

  it.each([
    ['no box at all', 'I would say 80.'],
    ['a word in the box', '\\boxed{good}'],
    ['a reward instead of a score', '\\boxed{-1}'],
    ['out of range', '\\boxed{150}'],
    ['a range', '\\boxed{70-80}'],
    ['cut off by the token limit', 'correctness: 90 | fine\n\\boxed{8'],
    ['only inside the reasoning', '<think>\\boxed{80}</think>I cannot decide.'],
    ['unclosed reasoning', 'correctness: 90 | ok\n<think>maybe \\boxed{80}'],
    ['an empty answer', ''],
    ['a later malformed box overrides an earlier good one', '\\boxed{80} on reflection \\boxed{eighty}'],
  ])('malformed (%s): no vote', (_, raw) => {
    expect(parseCompositeAnswer(raw).score).toBeUndefined();
  });

  it('a garbled dimension line loses only its reason, never the vote', () => {
    const a = parseCompositeAnswer('correctness: ???\ninstruction: 900 | typo\n\\boxed{75}');
    expect(a.score).toBe(75);
    expect(a.dimensions).toEqual([
      { name: 'correctness', score: null, reason: '???' },
      { name: 'instruction', score: null, reason: 'typo' },
    ]);
  });
});

describe('thresholds and vote counting', () => {
  const t = { pos: 70, neg: 30 };
  it('maps a score through the thresholds, inclusive at both ends', () => {
    expect([70, 69.9, 31, 30, 0, 100].map((s) => rewardFromScore(s, t))).toEqual([1, 0, 0, -1, -1, 1]);
    expect(thresholdProblem({ pos: 50, neg: 50 })).toMatch(/must be below/);
    expect(thresholdProblem({ pos: 101, neg: 0 })).toMatch(/0 to 100/);
    expect(thresholdProblem(t)).toBeNull();
  });

  it('the median of the readable votes decides; confidence counts every vote; reasons come from the vote nearest the median', () => {
    const votes = ['\\boxed{80}', 'tone: 20 | rude\n\\boxed{20}', 'correctness: 90 | right\n\\boxed{75}', 'garbage'].map((raw) => compositeVote(raw, t));
    const part = compositeFromVotes(votes, t);
    expect(part.reward).toBe(1); // median of 80, 20, 75 = 75 ≥ 70
    expect(part.composite).toEqual({ score: 75, dimensions: [{ name: 'correctness', score: 90, reason: 'right' }], thresholds: t });
    expect(part.confidence).toBe(0.5); // 2 of 4 votes gave +1
    expect(part.evidence).toEqual(['composite score 75 (votes 80, 20, 75, 1 unreadable) ≥ 70 → +1']);
  });

  it('no readable vote: 0 with no score, and says so', () => {
    const part = compositeFromVotes([compositeVote('nope', t), compositeVote('\\boxed{x}', t)], t);
    expect(part).toEqual({ reward: 0, composite: undefined, confidence: 0, evidence: ['no readable composite score (2 votes) → 0'] });
  });
});

describe('over HTTP with a scripted OpenAI-compatible server', () => {
  const servers: ScriptedServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
  });

  it('votes, stores score and reasons with the label, exports them, and queues a split for review', async () => {
    const answers = [WELL_FORMED, 'instruction: 35 | half right\n\\boxed{35}', 'I refuse to rate this.'];
    const server = await scriptedServer((body, n) => {
      expect(body.messages[0].content).toMatch(/correctness: <0-100> \| <reason>/);
      return { content: answers[n % 3] };
    });
    servers.push(server);
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'scorer', backoffMs: 10, concurrency: 1 }), { maxTokens: 64, composite: { pos: 70, neg: 30 } });
    const ws = await sortingWorkspace();
    const summary = await runJudge(ws, judge, { hints: false, votes: 3 });
    expect(summary.promptVersion).toBe('composite-v1@70/30');
    expect(summary.judged).toBe(3);

    const [first] = ws.listSamples();
    expect(first!.label).toMatchObject({ reward: -1, source: 'judge:scorer', confidence: 0.33 }); // median of 22, 35 = 28.5 ≤ 30
    expect(first!.label.votes.map((v) => [v.score, v.reward])).toEqual([[22, -1], [35, 0], [undefined, undefined]]);
    expect(first!.label.composite).toEqual({ score: 28.5, dimensions: parseCompositeAnswer(WELL_FORMED).dimensions, thresholds: { pos: 70, neg: 30 } });

    const out = tempDir();
    for (const format of ['samples', 'openclaw'] as const) {
      await ws.exportJsonl(format, path.join(out, `${format}.jsonl`));
      const line = JSON.parse(fs.readFileSync(path.join(out, `${format}.jsonl`), 'utf8').split('\n')[0]!);
      expect(line.composite).toEqual({
        score: 28.5,
        thresholds: { pos: 70, neg: 30 },
        dimensions: {
          correctness: { score: 40, reason: 'It sorts, but in JavaScript.' },
          instruction: { score: 10, reason: 'The user asked for Python.' },
          tone: { score: 80, reason: 'Plain and polite.' },
          length: { score: 70, reason: 'Short enough.' },
        },
      });
    }

    const queue = ws.reviewQueue();
    expect(queue.total).toBe(3);
    expect(queue.items[0]!.reasons).toContain('split');
    expect(queue.items[0]!.sample.label.composite?.score).toBe(28.5);

    // Changing the thresholds is a new prompt version: the next run judges again.
    const again = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'scorer', backoffMs: 10 }), { composite: { pos: 60, neg: 20 } });
    expect((await runJudge(ws, again, { hints: false, votes: 1 })).judged).toBe(3);
    ws.close();
  });
});

describe('judge --composite on the command line', () => {
  it('needs an LLM judge and sane thresholds', async () => {
    const db = path.join(tempDir(), 'x.db');
    const heuristic = await runCli('judge', '--composite', '--db', db);
    expect(heuristic.code).toBe(2);
    expect(heuristic.stderr).toMatch(/--composite needs an LLM judge/);
    const inverted = await runCli('judge', '--backend', 'openai', '--judge-model', 'm', '--composite', '--composite-pos', '20', '--composite-neg', '40', '--db', db);
    expect(inverted.code).toBe(2);
    expect(inverted.stderr).toMatch(/must be below/);
    const without = await runCli('judge', '--backend', 'openai', '--judge-model', 'm', '--composite-pos', '80', '--db', db);
    expect(without.code).toBe(2);
    expect(without.stderr).toMatch(/need --composite/);
  });
});
