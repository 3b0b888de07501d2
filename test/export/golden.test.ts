// Golden exports: one database built from the test fixtures (several import formats,
// hand-made conversations with a regeneration, an LLM-style judge run, the heuristic with
// hints, manual labels with hints and repairs, a re-import that moves labels, a live-capture
// session and a context window), exported in all six formats and compared byte for byte
// with the files under test/fixtures/export-golden/.
//
// The exports depend only on the database (no export time anywhere), so any difference is a
// change in behaviour. After an intended change, regenerate the files with
//   HINDSIGHT_UPDATE_GOLDEN=1 npx vitest run test/export/golden.test.ts
// and review the diff before committing it.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LabelSource } from '../../src-shared/types.js';
import { EXPORT_FORMATS } from '../../src-shared/views.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge, type JudgeBackend, type JudgeInput, type JudgeOptions, type JudgeVerdict } from '../../src-main/judge/verdicts.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { chatgptConversation } from '../import/helpers.js';
import { SESSION_001, SESSION_002, SESSION_003, SORTING, conv, fakeExport, tempWorkspace } from '../store/helpers.js';

const GOLDEN_DIR = path.resolve(import.meta.dirname, '../fixtures/export-golden');
const UPDATE = process.env.HINDSIGHT_UPDATE_GOLDEN === '1';
const CHATGPT_SAMPLE = path.resolve(import.meta.dirname, '../fixtures/chatgpt-branches.json');

/** A deterministic stand-in for an LLM judge: a correction gets -1 (and a hint), anything else +1. */
class ScriptedJudge implements JudgeBackend {
  readonly provenance = { backend: 'openai' as const, model: 'scripted-judge', promptVersion: 'reward-v1' };
  readonly labelSource: LabelSource = 'judge:scripted-judge';

  async judge(input: JudgeInput, options: JudgeOptions): Promise<JudgeVerdict> {
    const corrected = /\b(?:no|too|instead|meant)\b/i.test(input.nextState.text);
    const reward = corrected ? -1 : 1;
    const hint = options.hints && corrected ? `Follow the user's correction: ${input.nextState.text.slice(0, 60)}` : null;
    const votes = Array.from({ length: options.votes }, (_, i) => ({
      reward: (i === 2 ? 0 : reward) as -1 | 0 | 1,
      raw: `vote ${i}: \\boxed{${reward}}`,
      ...(hint ? { hint, hintAnswer: 1 as const } : {}),
    }));
    return { reward, hint, votes };
  }
}

function writeFixture(dir: string, name: string, value: unknown): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value));
  return file;
}

const jsonl = (records: unknown[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

/** Export files of several formats, written to `dir`. */
function formatFixtures(dir: string): string[] {
  const claude = writeFixture(dir, 'claude.json', [
    {
      uuid: 'claude-1', name: 'Weather lookup', created_at: '2025-02-03T04:05:06.000Z', updated_at: '2025-02-03T05:00:00Z',
      chat_messages: [
        { uuid: 'h1', sender: 'human', text: 'Weather in Paris?', content: [{ type: 'text', text: 'Weather in Paris?' }], attachments: [], files: [], created_at: '2025-02-03T04:05:07Z' },
        {
          uuid: 'a1', sender: 'assistant', text: '', created_at: '2025-02-03T04:05:08Z',
          content: [
            { type: 'thinking', thinking: 'I should look it up.' },
            { type: 'text', text: 'Let me check.' },
            { type: 'tool_use', id: 'toolu_1', name: 'web_search', input: { query: 'Paris weather' } },
            { type: 'tool_result', tool_use_id: 'toolu_1', name: 'web_search', content: [{ type: 'text', text: 'Error: rate limit exceeded' }], is_error: true },
            { type: 'text', text: 'It is sunny and 21°C.' },
          ],
        },
        { uuid: 'h2', sender: 'human', text: 'That is wrong, I meant Paris, Texas.', content: [{ type: 'text', text: 'That is wrong, I meant Paris, Texas.' }], attachments: [], files: [], created_at: '2025-02-03T04:06:00Z' },
        { uuid: 'a2', sender: 'assistant', text: 'Paris, Texas is cloudy at 15°C.', content: [{ type: 'text', text: 'Paris, Texas is cloudy at 15°C.' }], created_at: '2025-02-03T04:06:10Z' },
        { uuid: 'h3', sender: 'human', text: 'Thanks, perfect.', content: [{ type: 'text', text: 'Thanks, perfect.' }], attachments: [], files: [], created_at: '2025-02-03T04:07:00Z' },
      ],
    },
  ]);
  const sharegpt = writeFixture(dir, 'sharegpt.json', [
    {
      id: 'sg-1', system: 'You are helpful.', tools: JSON.stringify([{ name: 'get_weather', parameters: { type: 'object' } }]),
      conversations: [
        { from: 'human', value: 'Weather in Oslo?' },
        { from: 'function_call', value: '{"name":"get_weather","arguments":{"city":"Oslo"}}' },
        { from: 'observation', value: '{"temp": -3}' },
        { from: 'gpt', value: 'It is -3°C in Oslo.' },
        { from: 'human', value: 'Too short. Please add the wind speed too.' },
        { from: 'gpt', value: 'It is -3°C in Oslo with a light wind of 3 m/s.' },
        { from: 'human', value: 'Great, thanks!' },
      ],
    },
    { conversations: [{ from: 'human', value: 'Hi' }, { from: 'gpt', value: 'Hello! How can I help?' }, { from: 'human', value: 'Tell me a fact.' }] },
  ]);
  const openai = writeFixture(dir, 'chat.jsonl', jsonl([
    {
      messages: [
        { role: 'developer', content: 'Be terse.' },
        { role: 'user', content: 'List the files.' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'ls', arguments: '{"path":"."}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'ls: cannot access: No such file or directory' },
        { role: 'assistant', content: 'The folder does not exist.' },
        { role: 'user', content: 'You should use the absolute path /home/me instead.' },
      ],
    },
    { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }, { role: 'user', content: 'Nice, that works.' }] },
  ]));
  const messages = writeFixture(dir, 'hf.json', [
    {
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'You describe images.' }] },
        { role: 'user', content: [{ type: 'image' }, { type: 'text', text: 'What is this?' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'A dog.' }], reasoning_content: 'Four legs.' },
        { role: 'user', content: [{ type: 'text', text: 'No, it is a cat. Look at the ears.' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'A cat, with pointed ears.' }] },
        { role: 'user', content: [{ type: 'text', text: 'Exactly right.' }] },
      ],
    },
  ]);
  const chatgpt = writeFixture(dir, 'chatgpt.json', [
    chatgptConversation([
      { id: 'root', parent: null },
      { id: 'u1', parent: 'root', role: 'user', text: 'Name a prime number.' },
      { id: 'a1', parent: 'u1', role: 'assistant', text: 'Nine.' },
      { id: 'a2', parent: 'u1', role: 'assistant', text: 'Seven.' },
      { id: 'u2', parent: 'a2', role: 'user', text: 'Correct, thanks.' },
    ], { id: 'gpt-primes', conversation_id: 'gpt-primes', title: 'Primes' }),
  ]);
  return [CHATGPT_SAMPLE, chatgpt, claude, sharegpt, openai, messages];
}

const REGENERATED = { atTurn: 2, turn: { role: 'assistant' as const, text: 'Sure! Which language would you like it in?' } };
const REPAIR = 'def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)';

async function buildGoldenWorkspace(): Promise<{ ws: Workspace; dir: string }> {
  const { ws, dir } = await tempWorkspace();
  await ws.importExport(fakeExport('hand.jsonl', [
    conv('sort', SORTING.slice(0, 6), { createdAt: 10, alternatives: [REGENERATED] }),
    conv('rec', SESSION_002, { createdAt: 20 }),
  ]));
  // An LLM judge labels the first sessions, with hints; the heuristic must not overwrite them.
  await runJudge(ws, new ScriptedJudge(), { hints: true, votes: 3 });

  await ws.importFiles(formatFixtures(dir));
  await ws.importExport(fakeExport('more.jsonl', [conv('geo', SESSION_001, { createdAt: 30 }), conv('web', SESSION_003, { createdAt: 40 })]));
  await runJudge(ws, new HeuristicJudge(), { hints: true });

  ws.setLabel('openai:web', 1, { reward: -1, hint: 'Ask what the project will need before comparing frameworks.', notes: 'vague opener' });
  ws.setLabel('openai:web', 3, { repair: 'Django: it grows with the project.' });
  ws.setLabel('openai:geo', 2, { repair: 'The capital of France is Paris.' }); // same text as the reply: no DPO pair
  ws.setLabel('openai:rec', 1, { reward: 0, hint: '  ' });
  ws.setLabel('openai:sort', 4, { reward: 1, repair: REPAIR });

  // A newer export of the sorting chat: two more turns; its labels follow their replies.
  await ws.importExport(fakeExport('hand-v2.jsonl', [conv('sort', SORTING, { createdAt: 10, alternatives: [REGENERATED] })]));
  await runJudge(ws, new HeuristicJudge(), { hints: true });

  ws.applyCapture(
    [{
      id: 'x-1', sessionId: 'capture:live-1', seq: 0, kind: 'main', at: 1_700_000_500, replyTurn: 1,
      messages: [{ role: 'user', content: 'Say hi.' }], reply: { content: 'Hi!', toolCalls: [], finishReason: 'stop' },
      servedBy: 'upstream', model: 'm', modelDir: null, rollout: null,
    }],
    [conv('live-1', [['user', 'Say hi.'], ['assistant', 'Hi!'], ['user', 'Thanks!']], { createdAt: 50 })],
    path.join(dir, 'capture.log'),
  );
  ws.setContextWindow({ lastTurns: 5 });
  return { ws, dir };
}

describe('golden exports', () => {
  const built = buildGoldenWorkspace();
  afterAll(async () => {
    const { ws, dir } = await built;
    ws.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const format of EXPORT_FORMATS) {
    it(`${format}: byte-identical to test/fixtures/export-golden/${format}.jsonl`, async () => {
      const { ws, dir } = await built;
      const out = path.join(dir, `${format}.jsonl`);
      const { lines } = await ws.exportJsonl(format, out);
      expect(lines).toBeGreaterThan(0);
      const golden = path.join(GOLDEN_DIR, `${format}.jsonl`);
      if (UPDATE) {
        fs.mkdirSync(GOLDEN_DIR, { recursive: true });
        fs.copyFileSync(out, golden);
      }
      const [actual, expected] = [fs.readFileSync(out), fs.readFileSync(golden)];
      if (!actual.equals(expected)) expect(actual.toString('utf8')).toBe(expected.toString('utf8')); // shows the diff
      expect(actual.equals(expected)).toBe(true);
    });
  }

  it('counts before writing: each format’s count is the golden file’s line count, and with held-out sessions left out, the lines then written', async () => {
    const { ws, dir } = await built;
    const counts = ws.exportCounts();
    for (const format of EXPORT_FORMATS) {
      const golden = fs.readFileSync(path.join(GOLDEN_DIR, `${format}.jsonl`), 'utf8').trim().split('\n').length;
      expect(counts.lines[format], format).toBe(golden);
    }
    expect(counts.heldOutLeftOut).toBe(0);
    // Hold one session with samples out: counts and written files both lose its lines.
    const held = ws.listSessions({ hasSamples: true }).sessions[0]!.id;
    ws.setHeldOut([held], true);
    try {
      const without = ws.exportCounts({ leaveOutHeldOut: true });
      expect(without.heldOutLeftOut).toBeGreaterThanOrEqual(1);
      expect(without.sessions + without.heldOutLeftOut).toBe(counts.sessions);
      expect(without.lines.samples).toBeLessThan(counts.lines.samples);
      for (const format of EXPORT_FORMATS) {
        const { lines } = await ws.exportJsonl(format, path.join(dir, `filtered-${format}.jsonl`), { leaveOutHeldOut: true });
        expect(without.lines[format], format).toBe(lines);
        expect(ws.previewExport(format, 100, { leaveOutHeldOut: true })).toHaveLength(Math.min(100, lines));
      }
      expect(ws.exportCounts()).toEqual(counts); // without the filter, held-out sessions count
    } finally {
      ws.setHeldOut([held], null);
    }
  });
});
